package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// UnreadableColumn says why one JSON column of a resource row cannot be decoded: a number
// Go cannot hold (1e400), nesting deeper than the decoder allows, or a value that is not an
// object. It is the row's problem, not the store's: the rest of the row is read as usual.
type UnreadableColumn struct {
	Column string // args, state or config
	Reason string // what is wrong, without the value itself beyond a short excerpt
}

func (c UnreadableColumn) Error() string {
	return c.Column + " is not JSON Berth can read: " + c.Reason
}

// maxNestingDepth is encoding/json's own limit on nesting, which it does not export.
const maxNestingDepth = 10000

// maxExcerpt bounds how much of an offending value a reason quotes.
const maxExcerpt = 40

// DecodeObjectColumn decodes raw, the stored JSON of column, as a JSON object. SQL null and
// JSON null give a nil map. When raw cannot be read as an object the result is nil and the
// UnreadableColumn says why; it never panics, whatever raw holds.
func DecodeObjectColumn(column string, raw []byte) (map[string]any, *UnreadableColumn) {
	if raw == nil {
		return nil, nil
	}
	var m map[string]any
	err := json.Unmarshal(raw, &m)
	if err == nil {
		return m, nil
	}
	return nil, &UnreadableColumn{Column: column, Reason: decodeReason(raw, err)}
}

// decodeReason turns a json.Unmarshal error into words a person can act on.
func decodeReason(raw []byte, err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case len(bytes.TrimSpace(raw)) == 0:
		return "it is empty"
	case errors.As(err, &typeErr) && strings.HasPrefix(typeErr.Value, "number "):
		// A number Go's float64 cannot hold, anywhere in the value.
		return "number " + shortNumber(strings.TrimPrefix(typeErr.Value, "number ")) + " out of range"
	case errors.As(err, &typeErr):
		// The top-level value is of another kind than an object.
		return fmt.Sprintf("it holds a JSON %s, not an object", typeErr.Value)
	case errors.As(err, &syntaxErr) && strings.Contains(syntaxErr.Error(), "max depth"):
		return fmt.Sprintf("nested deeper than %d levels", maxNestingDepth)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("invalid JSON at byte %d", syntaxErr.Offset)
	default:
		return "it cannot be decoded"
	}
}

// shortNumber writes the JSON number literal n in a few characters (PostgreSQL stores
// 1e400 as its 401 digits): six significant digits and an exponent.
func shortNumber(n string) string {
	f, _, err := big.ParseFloat(n, 10, 64, big.ToNearestEven)
	if err != nil {
		return excerpt(n)
	}
	return f.Text('g', 6)
}

// excerpt shortens s to maxExcerpt characters, marking the cut.
func excerpt(s string) string {
	if len(s) <= maxExcerpt {
		return s
	}
	return s[:maxExcerpt] + "..."
}

// DecodeResourceJSON fills r's Args, State and Config from their stored JSON, and records
// each column that cannot be read in r.Unreadable instead of failing the whole row.
func DecodeResourceJSON(r *Resource, args, state, config []byte) {
	r.Unreadable = nil
	for _, col := range []struct {
		name string
		raw  []byte
		dst  *map[string]any
	}{{"args", args, &r.Args}, {"state", state, &r.State}, {"config", config, &r.Config}} {
		m, bad := DecodeObjectColumn(col.name, col.raw)
		*col.dst = m
		if bad != nil {
			r.Unreadable = append(r.Unreadable, *bad)
		}
	}
}
