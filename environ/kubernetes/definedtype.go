package kubernetes

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/internal/specjson"
)

// TypeSpec is a resource type a provisioner's spec defines (its "types" key): the
// templates of its objects, the JSON Schema of its args, how its readiness is judged, the
// config it reports, whether it hibernates and its size. docs/types.md documents each key.
type TypeSpec struct {
	// Help says in one line what a resource of the type is.
	Help string `json:"help,omitempty"`
	// Prefix starts the names of the type's objects, before the provision id; default the
	// type's name and a dash.
	Prefix string `json:"prefix,omitempty"`
	// Templates are the files of the type's templates (relative paths start at the agent's
	// working directory, as template_paths'), applied in kind order.
	Templates []string `json:"templates"`
	// ArgsSchema is the JSON Schema (draft 2020-12 unless it says otherwise) of the args.
	ArgsSchema json.RawMessage `json:"args_schema"`
	// ExampleArgs are the args New test-renders the templates with; default: the schema's
	// top-level defaults.
	ExampleArgs map[string]any `json:"example_args,omitempty"`
	// Ready adds to the workload's rollout an HTTP readiness probe, when set.
	Ready *ReadySpec `json:"ready,omitempty"`
	// Config maps each key of the config the resource reports to a template of its value.
	Config map[string]string `json:"config,omitempty"`
	// Hibernates says the type can hibernate: its workload scaled to zero, all else kept.
	Hibernates bool `json:"hibernates,omitempty"`
	// Units is a template of the resource's size in the provisioner's units (for owner
	// quotas); empty: 0.
	Units string `json:"units,omitempty"`
	// GeneratedSecret, when set, gives each resource a password Berth generates once and
	// keeps in a Secret of its own, as ClickHouse's.
	GeneratedSecret *GeneratedSecretSpec `json:"generated_secret,omitempty"`
}

// GeneratedSecretSpec is a defined type's generated password: a Secret named the
// resource's base name and Suffix, holding a random password under Key, created once and
// never applied (later reconciles read it back). Templates see its name as .SecretName
// and the key as .PasswordKey; the password itself is nowhere else.
type GeneratedSecretSpec struct {
	Suffix string `json:"suffix"`
	Key    string `json:"key"`
}

// ReadySpec says how a defined type's readiness is judged besides its workload's rollout.
type ReadySpec struct {
	HTTP *HTTPProbeSpec `json:"http,omitempty"`
}

// HTTPProbeSpec is an HTTP GET readiness probe of the workload's container: the cluster
// judges it (the container's readinessProbe), so a pod is available only once it answers,
// and the rollout Berth waits for includes it.
type HTTPProbeSpec struct {
	Path string `json:"path"`
	Port int    `json:"port"`
	// Container names the container probed; default the first.
	Container string `json:"container,omitempty"`
}

var (
	typeNamePattern  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,29}$`)
	prefixPattern    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	configKeyPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	suffixPattern    = regexp.MustCompile(`^-[a-z0-9-]{1,20}$`)
	secretKeyPattern = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)
)

// parseTypes decodes the spec's "types": each type name to its definition, checked for
// everything that needs no file (the templates are read, and the schema compiled, by New).
func parseTypes(raw json.RawMessage) (map[string]*TypeSpec, error) {
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err != nil || byName == nil {
		return nil, &domain.FieldError{Field: "types", Msg: `must be an object of type name -> definition, e.g. {"redis": {"templates": [...], "args_schema": {...}}}`}
	}
	out := make(map[string]*TypeSpec, len(byName))
	for name, def := range byName {
		field := "types." + name
		if !typeNamePattern.MatchString(name) {
			return nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("%q cannot name a resource type: use lower-case letters, digits and dashes, starting with a letter, at most 30", name)}
		}
		if _, builtin := lookupType(domain.ResourceType(name)); builtin {
			return nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("%s is a built-in type of the kubernetes provisioner: give yours another name", name)}
		}
		ts := &TypeSpec{}
		var ready, probe, secret json.RawMessage
		if err := specjson.DecodeObject(field, field+".", def, []specjson.Field{
			{Name: "help", Dst: &ts.Help},
			{Name: "prefix", Dst: &ts.Prefix},
			{Name: "templates", Dst: &ts.Templates},
			{Name: "args_schema", Dst: &ts.ArgsSchema},
			{Name: "example_args", Dst: &ts.ExampleArgs},
			{Name: "ready", Dst: &ready},
			{Name: "config", Dst: &ts.Config},
			{Name: "hibernates", Dst: &ts.Hibernates},
			{Name: "units", Dst: &ts.Units},
			{Name: "generated_secret", Dst: &secret},
		}); err != nil {
			return nil, err
		}
		if secret != nil {
			ts.GeneratedSecret = &GeneratedSecretSpec{}
			if err := specjson.DecodeObject(field+".generated_secret", field+".generated_secret.", secret, []specjson.Field{
				{Name: "suffix", Dst: &ts.GeneratedSecret.Suffix},
				{Name: "key", Dst: &ts.GeneratedSecret.Key},
			}); err != nil {
				return nil, err
			}
		}
		if ready != nil {
			ts.Ready = &ReadySpec{}
			if err := specjson.DecodeObject(field+".ready", field+".ready.", ready, []specjson.Field{{Name: "http", Dst: &probe}}); err != nil {
				return nil, err
			}
			if probe != nil {
				ts.Ready.HTTP = &HTTPProbeSpec{}
				if err := specjson.DecodeObject(field+".ready.http", field+".ready.http.", probe, []specjson.Field{
					{Name: "path", Dst: &ts.Ready.HTTP.Path},
					{Name: "port", Dst: &ts.Ready.HTTP.Port},
					{Name: "container", Dst: &ts.Ready.HTTP.Container},
				}); err != nil {
					return nil, err
				}
			}
		}
		if len(bytes.TrimSpace(ts.ArgsSchema)) == 0 {
			return nil, &domain.FieldError{Field: field + ".args_schema", Msg: `is required: the JSON Schema of the type's args, e.g. {"type": "object", "properties": {}, "additionalProperties": false}`}
		}
		if err := ts.validate(name); err != nil {
			return nil, err
		}
		out[name] = ts
	}
	return out, nil
}

func (ts *TypeSpec) validate(name string) error {
	field := "types." + name
	if ts.Prefix == "" {
		ts.Prefix = name + "-"
	}
	if !prefixPattern.MatchString(ts.Prefix) {
		return &domain.FieldError{Field: field + ".prefix", Msg: fmt.Sprintf("%q cannot start object names: use at most 20 lower-case letters, digits and dashes, starting with a letter (a type name longer than 19 needs a prefix of its own)", ts.Prefix)}
	}
	if len(ts.Templates) == 0 {
		return &domain.FieldError{Field: field + ".templates", Msg: "is required: the paths of the type's template files, e.g. [\"types/redis/deployment.yaml\", \"types/redis/service.yaml\"]"}
	}
	for i, p := range ts.Templates {
		if strings.TrimSpace(p) == "" {
			return &domain.FieldError{Field: fmt.Sprintf("%s.templates.%d", field, i), Msg: "is empty: give the path of a template file"}
		}
	}
	for key := range ts.Config {
		if !configKeyPattern.MatchString(key) {
			return &domain.FieldError{Field: field + ".config." + key, Msg: "cannot be a config key: use lower-case letters, digits and '_', starting with a letter"}
		}
	}
	if g := ts.GeneratedSecret; g != nil {
		if g.Suffix == "" {
			g.Suffix = "-auth"
		}
		if g.Key == "" {
			g.Key = "password"
		}
		if !suffixPattern.MatchString(g.Suffix) {
			return &domain.FieldError{Field: field + ".generated_secret.suffix", Msg: fmt.Sprintf("%q cannot end a Secret's name: use '-' and at most 20 lower-case letters, digits and dashes, e.g. -auth", g.Suffix)}
		}
		if !secretKeyPattern.MatchString(g.Key) {
			return &domain.FieldError{Field: field + ".generated_secret.key", Msg: fmt.Sprintf("%q cannot be a Secret's key: use letters, digits, '-', '_' and '.'", g.Key)}
		}
	}
	if p := ts.Ready; p != nil && p.HTTP != nil {
		if !strings.HasPrefix(p.HTTP.Path, "/") {
			return &domain.FieldError{Field: field + ".ready.http.path", Msg: fmt.Sprintf("%q must be an absolute URL path, e.g. /healthz", p.HTTP.Path)}
		}
		if p.HTTP.Port < 1 || p.HTTP.Port > 65535 {
			return &domain.FieldError{Field: field + ".ready.http.port", Msg: fmt.Sprintf("must be a port number from 1 to 65535, got %d", p.HTTP.Port)}
		}
	}
	return nil
}

// definedType is what New makes of a TypeSpec (a spec's, or a built-in type's embedded
// one): its compiled schema and templates.
type definedType struct {
	name   string
	spec   *TypeSpec
	schema *jsonschema.Schema
	// check reads the args of a built-in type, which has no schema (its TypeDef's check).
	check func(args map[string]any) error
	// properties are the schema's top-level properties, for defaults, help and errors.
	properties map[string]map[string]any
	config     map[string]*template.Template
	units      *template.Template
	digest     string
}

// schemaPrinter says schema errors in English.
var schemaPrinter = message.NewPrinter(language.English)

// compileType compiles the schema and the config and units templates of type name. A
// built-in type's definition has no schema: check, the Go check of its TypeDef, reads its
// args instead.
func compileType(name string, ts *TypeSpec, check func(map[string]any) error) (*definedType, error) {
	field := "types." + name
	d := &definedType{name: name, spec: ts, check: check, properties: map[string]map[string]any{}, config: map[string]*template.Template{}}
	top := map[string]any{}
	if check == nil {
		var err error
		if d.schema, top, err = compileSchema(name, ts.ArgsSchema); err != nil {
			return nil, err
		}
	}
	if props, ok := top["properties"].(map[string]any); ok {
		for k, v := range props {
			if p, ok := v.(map[string]any); ok {
				d.properties[k] = p
			}
		}
	}
	for key, text := range ts.Config {
		t, err := template.New(key).Funcs(templateFuncs).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, &domain.FieldError{Field: field + ".config." + key, Msg: err.Error()}
		}
		d.config[key] = t
	}
	if ts.Units != "" {
		var err error
		if d.units, err = template.New("units").Funcs(templateFuncs).Option("missingkey=error").Parse(ts.Units); err != nil {
			return nil, &domain.FieldError{Field: field + ".units", Msg: err.Error()}
		}
	}
	canonical, err := json.Marshal(ts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	sum := sha256.Sum256(canonical)
	d.digest = hex.EncodeToString(sum[:])
	return d, nil
}

// compileSchema compiles the args schema of type name, and returns it with its top level.
func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, map[string]any, error) {
	field := "types." + name + ".args_schema"
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, &domain.FieldError{Field: field, Msg: "is not JSON: " + err.Error()}
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, &domain.FieldError{Field: field, Msg: "must be a JSON Schema object describing the args object"}
	}
	if top["type"] != "object" {
		return nil, nil, &domain.FieldError{Field: field + ".type", Msg: `must be "object": args are an object of named values`}
	}
	if top["additionalProperties"] != false {
		return nil, nil, &domain.FieldError{Field: field + ".additionalProperties", Msg: "must be false: an arg the schema does not name (a typo) is refused rather than ignored"}
	}
	url := "berth:///types/" + name + "/args_schema.json"
	c := jsonschema.NewCompiler()
	// A schema is self-contained: it loads nothing from files or the network.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	// A "format" the schema names is checked, not only noted.
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		return nil, nil, &domain.FieldError{Field: field, Msg: err.Error()}
	}
	schema, err := c.Compile(url)
	if err != nil {
		return nil, nil, &domain.FieldError{Field: field, Msg: strings.ReplaceAll(err.Error(), url, "the schema")}
	}
	return schema, top, nil
}

// validate checks args against the type's schema (a built-in type's with its Go check): an
// error is a *domain.FieldError naming the arg (args.<field>, or the path into it) and how
// to fix it.
func (d *definedType) validate(args map[string]any) error {
	if d.check != nil {
		return d.check(args)
	}
	if args == nil {
		args = map[string]any{}
	}
	// The schema library reads JSON values: numbers of any Go kind, maps of any, slices of any.
	inst, err := jsonValue(args)
	if err != nil {
		return &domain.FieldError{Field: "args", Msg: err.Error()}
	}
	err = d.schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &domain.FieldError{Field: "args", Msg: err.Error()}
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	path := ve.InstanceLocation
	msg := ve.ErrorKind.LocalizedString(schemaPrinter)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		path = append(path, k.Missing[0])
		msg = "is required"
	case *kind.AdditionalProperties:
		path = append(path, k.Properties[0])
		msg = fmt.Sprintf("is not an arg of type %s: use %s", d.name, d.argNames())
	}
	field := "args"
	for _, p := range path {
		field += "." + p
	}
	if len(path) > 0 {
		if hint := d.hint(path[0]); hint != "" {
			msg += "; " + path[0] + " is " + hint
		}
	}
	return &domain.FieldError{Field: field, Msg: msg}
}

// hint describes top-level arg name from its schema, for an error's fix: its description,
// else its type.
func (d *definedType) hint(name string) string {
	p, ok := d.properties[name]
	if !ok {
		return ""
	}
	if s, ok := p["description"].(string); ok && s != "" {
		return s
	}
	if s, ok := p["type"].(string); ok {
		return "a " + s
	}
	return ""
}

func (d *definedType) argNames() string {
	if len(d.properties) == 0 {
		return "no args (the type takes none)"
	}
	names := make([]string, 0, len(d.properties))
	for k := range d.properties {
		names = append(names, k)
	}
	sort.Strings(names)
	return "one of " + strings.Join(names, ", ")
}

// withDefaults returns args with the schema's top-level defaults filled in where args has
// no value; args itself is not changed.
func (d *definedType) withDefaults(args map[string]any) map[string]any {
	out := maps.Clone(args)
	if out == nil {
		out = map[string]any{}
	}
	for k, p := range d.properties {
		if v, ok := p["default"]; ok {
			if _, set := out[k]; !set {
				out[k] = v
			}
		}
	}
	return out
}

// typeDef is the type's definition for the registry's catalog: its args (from the schema's
// top-level properties) for help and --arg parsing, and the schema as its Validate.
func (d *definedType) typeDef() *environ.TypeDef {
	help := d.spec.Help
	if help == "" {
		help = "a " + d.name + " defined by a kubernetes provisioner's spec"
	}
	names := make([]string, 0, len(d.properties))
	for k := range d.properties {
		names = append(names, k)
	}
	sort.Strings(names)
	var args []environ.ArgDef
	for _, k := range names {
		p := d.properties[k]
		a := environ.ArgDef{Name: k, Help: d.hint(k)}
		if a.Help == "" {
			a.Help = "any value"
		}
		if v, ok := p["default"]; ok {
			js, _ := json.Marshal(v)
			a.Default = string(js)
		}
		a.String = p["type"] == "string"
		args = append(args, a)
	}
	return &environ.TypeDef{Name: domain.ResourceType(d.name), Help: help, Args: args, Validate: d.validate, Digest: d.digest}
}

// resourceType is the type's entry in the environ's table. Its workload is set from the
// example render (checkTemplates).
func (d *definedType) resourceType(templateKeys []string) resourceType {
	t := resourceType{
		name:       domain.ResourceType(d.name),
		prefix:     d.spec.Prefix,
		templates:  templateKeys,
		hibernates: d.spec.Hibernates,
		defined:    d,
		prepare: func(_ *kubeEnviron, args map[string]any, data *TemplateData) error {
			if err := d.validate(args); err != nil {
				return err
			}
			data.Args = d.withDefaults(args)
			if g := d.spec.GeneratedSecret; g != nil {
				data.SecretName = data.Name + g.Suffix
				data.PasswordKey = g.Key
			}
			return nil
		},
		checkSample: d.checkSample,
		config: func(_ *kubeEnviron, ds *desired) map[string]any {
			return ds.config
		},
	}
	if d.spec.GeneratedSecret != nil {
		t.extras = generatedSecret
	}
	t.sampleArgs = d.spec.ExampleArgs
	if t.sampleArgs == nil {
		t.sampleArgs = d.withDefaults(nil)
	}
	return t
}

// checkSample checks the example render: exactly one workload (a Deployment or a
// StatefulSet), whose rollout is the resource's readiness and which hibernating scales to
// zero.
func (d *definedType) checkSample(_ *kubeEnviron, objects []*unstructured.Unstructured) error {
	if n := countKind(objects, "Deployment") + countKind(objects, "StatefulSet"); n != 1 {
		return &domain.FieldError{Field: "types." + d.name + ".templates", Msg: fmt.Sprintf("must render exactly one Deployment or StatefulSet (the workload Berth waits for and hibernates), rendered %d", n)}
	}
	return nil
}

// workloadOfSample is the workload kind of an example render checkSample accepted.
func workloadOfSample(objects []*unstructured.Unstructured) workloadKind {
	if countKind(objects, "StatefulSet") == 1 {
		return statefulSets
	}
	return deployments
}

// finish completes a render of the type: it checks that the one workload is still there
// (args may switch templates' sections), adds the HTTP readiness probe to it and renders
// the config.
func (d *definedType) finish(t resourceType, data TemplateData, objects []*unstructured.Unstructured) (map[string]any, error) {
	field := "types." + d.name + ".templates"
	var workload *unstructured.Unstructured
	for _, obj := range objects {
		if k := obj.GetKind(); k == "Deployment" || k == "StatefulSet" {
			if workload != nil || k != t.workload.kind {
				return nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must render exactly one %s for every args, as for example_args", t.workload.kind)}
			}
			workload = obj
		}
	}
	if workload == nil {
		return nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must render exactly one %s for every args, as for example_args; rendered none", t.workload.kind)}
	}
	if p := d.spec.Ready; p != nil && p.HTTP != nil {
		if err := addProbe(workload, p.HTTP); err != nil {
			return nil, &domain.FieldError{Field: "types." + d.name + ".ready.http", Msg: err.Error()}
		}
	}
	cfg := make(map[string]any, len(d.config))
	view := configView{TemplateData: data, objects: objects}
	for key, tmpl := range d.config {
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, view); err != nil {
			return nil, &domain.FieldError{Field: "types." + d.name + ".config." + key, Msg: err.Error()}
		}
		cfg[key] = buf.String()
	}
	return cfg, nil
}

// sizeOf is the size of a resource of the type with args, as its units template renders
// it (0 without one).
func (d *definedType) sizeOf(args map[string]any) (int64, error) {
	if d.units == nil {
		return 0, nil
	}
	if err := d.validate(args); err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	if err := d.units.Execute(&buf, TemplateData{Args: d.withDefaults(args)}); err != nil {
		return 0, &domain.FieldError{Field: "types." + d.name + ".units", Msg: err.Error()}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(buf.String()), 10, 64)
	if err != nil || n < 0 {
		return 0, &domain.FieldError{Field: "types." + d.name + ".units", Msg: fmt.Sprintf("rendered %q, not a whole number of at least 0", buf.String())}
	}
	return n, nil
}

// configView is what a defined type's config templates see: the template data (its args
// included) and the names of the objects rendered. It has no Secret's data: config names
// where a secret is kept, never the secret.
type configView struct {
	TemplateData
	objects []*unstructured.Unstructured
}

// ObjectName is the name of the first rendered object of kind, e.g. {{ .ObjectName "Service" }}.
func (v configView) ObjectName(kind string) (string, error) {
	for _, obj := range v.objects {
		if obj.GetKind() == kind {
			return obj.GetName(), nil
		}
	}
	return "", fmt.Errorf("no %s is rendered", kind)
}

// addProbe sets the HTTP readiness probe on the workload's container (the named one, else
// the first), unless the template gave it one already: the probe is said in one place.
func addProbe(workload *unstructured.Unstructured, p *HTTPProbeSpec) error {
	containers, _, _ := unstructured.NestedSlice(workload.Object, "spec", "template", "spec", "containers")
	at := -1
	for i, c := range containers {
		m, _ := c.(map[string]any)
		if p.Container == "" || m["name"] == p.Container {
			at = i
			break
		}
	}
	if at < 0 {
		return fmt.Errorf("%s %s has no container %q: name one of its containers, or leave container out for the first", workload.GetKind(), workload.GetName(), p.Container)
	}
	c := containers[at].(map[string]any)
	if _, has := c["readinessProbe"]; has {
		return fmt.Errorf("container %v of %s %s has a readinessProbe already: give the probe in the template or in ready.http, not both", c["name"], workload.GetKind(), workload.GetName())
	}
	probe, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: p.Path, Port: intstr.FromInt32(int32(p.Port))}},
	})
	if err != nil {
		return err
	}
	c["readinessProbe"] = probe
	containers[at] = c
	return unstructured.SetNestedSlice(workload.Object, containers, "spec", "template", "spec", "containers")
}

// jsonValue is v as encoding/json would decode it (numbers as json.Number), the form the
// schema library validates.
func jsonValue(v any) (any, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot be encoded as JSON: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(js))
}

// builtinType is the table entry of a built-in type whose facts are a definition embedded
// in Berth (types/<name>/type.json), in the same form as a spec's: its templates are
// template_paths keys (built-in templates a spec may replace), check reads its args (the
// check of the TypeDef the registry knows), and workload is the kind that runs it. A
// definition that does not compile is a programming error: the package's tests load every
// one.
func builtinType(name domain.ResourceType, definition []byte, check func(map[string]any) error, workload workloadKind) resourceType {
	var ts TypeSpec
	dec := json.NewDecoder(bytes.NewReader(definition))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ts); err != nil {
		panic(fmt.Sprintf("kubernetes: built-in definition of %s: %v", name, err))
	}
	if err := ts.validate(string(name)); err != nil {
		panic(fmt.Sprintf("kubernetes: built-in definition of %s: %v", name, err))
	}
	d, err := compileType(string(name), &ts, check)
	if err != nil {
		panic(fmt.Sprintf("kubernetes: built-in definition of %s: %v", name, err))
	}
	t := d.resourceType(ts.Templates)
	t.workload = workload
	return t
}
