package kubernetes

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/berth-dev/berth/domain"
)

//go:embed templates/*.yaml
var builtinTemplates embed.FS

// TemplateData is what a template sees; the templates directory's README documents each
// field for template authors.
type TemplateData struct {
	Name         string // base name of the resource's objects: rt-<provision id> or ch-<provision id>
	Namespace    string
	ResourceID   string
	ProvisionID  string // the resource id without dashes
	Provisioner  string
	Type         string // runtime or clickhouse
	Host         string // the spec's host with '*' replaced by the provision id
	HostName     string // the host name of Host, for ingress rules
	Image        string
	DataDir      string
	Slots        int
	CPU          int    // cores: cpu_per_slot x slots
	MemoryGB     int    // memory_gb_per_slot x slots
	Memory       string // MemoryGB as a quantity, e.g. 4Gi
	StorageBytes int64  // storage_bytes_per_slot x slots
	Storage      string // StorageBytes as a quantity, e.g. 40Gi
	SecretName   string // clickhouse: the Secret holding the password
	PasswordKey  string // clickhouse: the password's key in that Secret
	// Args are, for a type the spec defines, the resource's args with the schema's defaults
	// filled in; nil for the built-in types.
	Args map[string]any
}

// templateFuncs are the functions templates may call besides Go's built-ins.
var templateFuncs = template.FuncMap{
	// quote renders any value as a double-quoted YAML string.
	"quote": func(v any) string { return strconv.Quote(fmt.Sprint(v)) },
}

// templateSet is the parsed templates of a provisioner, by template key.
type templateSet map[string]*template.Template

// loadTemplates parses the template of every key: the file paths names, read relative to the
// working directory, or the built-in template when paths has no entry for the key. It also
// returns a digest of each template's text, so an edited template file counts as a changed spec.
func loadTemplates(paths map[string]string) (templateSet, map[string]string, error) {
	set := make(templateSet, len(templateKeys))
	digests := make(map[string]string, len(templateKeys))
	for _, key := range templateKeys {
		field := "template_paths." + key
		name := key + ".yaml"
		var text []byte
		var err error
		if path, ok := paths[key]; ok {
			name = filepath.Base(path)
			if text, err = readFile(path); err != nil {
				return nil, nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("cannot read %s: %v; give the path of a template file (relative paths start at the agent's working directory) or leave the key out for the built-in template", path, err)}
			}
		} else if text, err = builtinTemplates.ReadFile("templates/" + name); err != nil {
			return nil, nil, fmt.Errorf("built-in template %s: %w", name, err)
		}
		t, err := template.New(name).Funcs(templateFuncs).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, nil, &domain.FieldError{Field: field, Msg: err.Error()}
		}
		set[key] = t
		sum := sha256.Sum256(text)
		digests[key] = hex.EncodeToString(sum[:])
	}
	return set, digests, nil
}

// definedTemplateKey is the key in a templateSet of the i-th template of defined type name:
// the field that names it in the spec, so errors about it name that field.
func definedTemplateKey(name string, i int) string {
	return fmt.Sprintf("types.%s.templates.%d", name, i)
}

// templateField is the spec field of template key: template_paths.<key> for a built-in
// template, the key itself for a defined type's (definedTemplateKey).
func templateField(key string) string {
	if strings.HasPrefix(key, "types.") {
		return key
	}
	return "template_paths." + key
}

// loadDefinedTemplates parses the templates of the types the spec defines into set, with
// their digests, and returns each type's template keys in the order its definition lists
// them.
func loadDefinedTemplates(types map[string]*TypeSpec, set templateSet, digests map[string]string) (map[string][]string, error) {
	keys := make(map[string][]string, len(types))
	for name, ts := range types {
		for i, path := range ts.Templates {
			key := definedTemplateKey(name, i)
			text, err := readFile(path)
			if err != nil {
				return nil, &domain.FieldError{Field: key, Msg: fmt.Sprintf("cannot read %s: %v; give the path of a template file (relative paths start at the agent's working directory)", path, err)}
			}
			t, err := template.New(filepath.Base(path)).Funcs(templateFuncs).Option("missingkey=error").Parse(string(text))
			if err != nil {
				return nil, &domain.FieldError{Field: key, Msg: err.Error()}
			}
			set[key] = t
			sum := sha256.Sum256(text)
			digests[key] = hex.EncodeToString(sum[:])
			keys[name] = append(keys[name], key)
		}
	}
	return keys, nil
}

// render executes the templates keys with data and decodes the objects they produce. Errors
// are *domain.FieldError naming the template key.
func (s templateSet) render(keys []string, data TemplateData, namespace string) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	seen := make(map[string]string)
	for _, key := range keys {
		field := templateField(key)
		var buf bytes.Buffer
		if err := s[key].Execute(&buf, data); err != nil {
			return nil, &domain.FieldError{Field: field, Msg: err.Error()}
		}
		objs, err := decodeManifests(s[key].Name(), buf.Bytes(), namespace)
		if err != nil {
			return nil, &domain.FieldError{Field: field, Msg: err.Error()}
		}
		for _, obj := range objs {
			id := obj.GetKind() + " " + obj.GetName()
			if other, dup := seen[id]; dup {
				return nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("%s is also rendered by %s: give each object its own name", id, templateField(other))}
			}
			seen[id] = key
		}
		objects = append(objects, objs...)
	}
	return objects, nil
}

// decodeManifests splits YAML documents into objects, checking that each is an object of a
// kind Berth manages that decodes strictly into its API type.
func decodeManifests(name string, manifests []byte, namespace string) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	var objects []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objects, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		js, err := utilyaml.ToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d is not valid YAML: %w", name, doc, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue // an empty document, e.g. comments only or a section switched off
		}
		// Whole numbers decode as int64, not float64, so that a size or a CPU count past 2^53
		// (a plain number in the YAML, e.g. a storage size that is no multiple of 1 KiB) stays exact.
		var content map[string]any
		if err := utiljson.Unmarshal(js, &content); err != nil {
			return nil, fmt.Errorf("%s: document %d is not a YAML mapping (an object with apiVersion, kind and metadata)", name, doc)
		}
		obj := &unstructured.Unstructured{Object: content}
		info, ok := kindOf(obj.GetAPIVersion(), obj.GetKind())
		if !ok {
			return nil, fmt.Errorf("%s: document %d: %s %q is not a kind Berth manages; use one of %s", name, doc, obj.GetAPIVersion(), obj.GetKind(), strings.Join(kindNames(), ", "))
		}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d (%s): metadata.name is required", name, doc, info.kind)
		}
		if ns := obj.GetNamespace(); ns != "" && ns != namespace {
			return nil, fmt.Errorf("%s: document %d (%s %s): metadata.namespace is %q but the provisioner's namespace is %q; leave it out", name, doc, info.kind, obj.GetName(), ns, namespace)
		}
		obj.SetNamespace(namespace)
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(info.newObject()); err != nil {
			return nil, fmt.Errorf("%s: document %d is not a valid %s: %w", name, doc, info.kind, err)
		}
		objects = append(objects, obj)
	}
}

// quantity renders bytes as a Kubernetes quantity in binary units (e.g. 40Gi).
func quantity(bytes int64) string {
	return resource.NewQuantity(bytes, resource.BinarySI).String()
}
