package environ

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/berth-dev/berth/domain"
)

// setSource is a provisioner set as written: JSON with comments and trailing commas allowed
// (JWCC, the way the provisioner set's documented example is written), parsed once so that
// an error can say where in the text the value it is about starts.
type setSource struct {
	text []byte       // as written
	tree hujson.Value // standardized: comments and trailing commas blanked, offsets kept
}

// parseSetSource parses text and returns it with the standard JSON it stands for, whose byte
// offsets are those of text.
func parseSetSource(text []byte) (*setSource, []byte, error) {
	tree, err := hujson.Parse(text)
	if err != nil {
		return nil, nil, fmt.Errorf("provisioner set is not JSON (comments and trailing commas are allowed): %s", strings.TrimPrefix(err.Error(), "hujson: "))
	}
	tree.Standardize()
	return &setSource{text: text, tree: tree}, tree.Pack(), nil
}

// at is the line and column in the text of the value at pointer (JSON pointer reference
// tokens, unescaped), or of the nearest enclosing value there is.
func (s *setSource) at(tokens ...string) string {
	for n := len(tokens); n >= 0; n-- {
		if v := s.tree.Find(pointer(tokens[:n])); v != nil {
			return s.position(v.StartOffset)
		}
	}
	return s.position(0)
}

// member is the position of the k-th (from 0) member of the top-level object named name, for
// a name the object has more than once.
func (s *setSource) member(name string, k int) string {
	obj, ok := s.tree.Value.(*hujson.Object)
	if !ok {
		return s.position(0)
	}
	for _, m := range obj.Members {
		lit, ok := m.Name.Value.(hujson.Literal)
		if !ok || lit.String() != name {
			continue
		}
		if k == 0 {
			return s.position(m.Name.StartOffset)
		}
		k--
	}
	return s.position(0)
}

// position is the line and column (both from 1, the column in bytes) of offset in the text.
func (s *setSource) position(offset int) string {
	offset = min(max(offset, 0), len(s.text))
	line := 1 + bytes.Count(s.text[:offset], []byte("\n"))
	column := 1 + offset - (bytes.LastIndexByte(s.text[:offset], '\n') + 1)
	return fmt.Sprintf("line %d, column %d", line, column)
}

// pointer is the JSON pointer (RFC 6901) of tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// fieldPathToken splits a field path as domain.FieldError names it ("runtimes[2].slots",
// "template_paths.pvc") into its keys and indexes.
var fieldPathToken = regexp.MustCompile(`[^.\[\]]+`)

// specField is where in provisioner name's spec the field err names is: the spec's tokens
// then the field's, or the spec alone when err names no field.
func specField(name string, err error) []string {
	tokens := []string{name, "spec"}
	var fe *domain.FieldError
	if !errors.As(err, &fe) || fe.Field == "spec" {
		return tokens
	}
	return append(tokens, fieldPathToken.FindAllString(fe.Field, -1)...)
}
