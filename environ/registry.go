package environ

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/juju/clock"

	"github.com/berth-dev/berth/domain"
)

// ResourceGetter looks up a resource row; brokers use it to tell orphans (objects whose
// resource no longer exists) from live ones.
type ResourceGetter interface {
	GetResource(ctx context.Context, id string) (domain.Resource, error)
}

// Deps are what a broker may use besides its own spec.
type Deps struct {
	// Slots records slot reservations (the static environ's source of truth).
	Slots domain.SlotStore
	// Resources looks up resource rows (nil where no database is at hand, e.g. check-config).
	Resources ResourceGetter
	// Budgets holds the shared rate budgets every agent draws from (nil where no database
	// is at hand: a provisioner whose spec sets a budget then refuses its first call).
	Budgets domain.BudgetStore
	// BudgetObserver records the budgets' waits, draws and tokens (the agent's metrics);
	// nil records nothing.
	BudgetObserver BudgetObserver
	// Logger is already tagged with the provisioner's name.
	Logger *slog.Logger
	Clock  clock.Clock
}

// BudgetObserver records what a provisioner's shared rate budget does: the time its calls
// waited for a token, its draws from the shared bucket, and the tokens it holds.
type BudgetObserver interface {
	ObserveBudgetWait(provisioner string, d time.Duration)
	ObserveBudgetDraw(provisioner string)
	ObserveBudgetTokens(provisioner string, held int)
}

// Initializer builds a broker named name from its JSON spec.
type Initializer func(name string, spec json.RawMessage, deps Deps) (Environ, error)

// Registry maps provisioner types to their initializers, and knows the resource types each
// serves (its Catalog).
type Registry struct {
	initializers map[string]Initializer
	catalog      *Catalog
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{initializers: make(map[string]Initializer), catalog: newCatalog()}
}

// Register makes provisioner type typ available, serving the resource types serves (each
// environ package exports the TypeDefs it serves, e.g. static.Types). Registering a type
// twice, or two definitions of one resource type, is a programming error and panics.
func (r *Registry) Register(typ string, fn Initializer, serves ...*TypeDef) {
	if typ == "" || fn == nil {
		panic("environ: Register needs a type and an initializer")
	}
	if _, dup := r.initializers[typ]; dup {
		panic(fmt.Sprintf("environ: provisioner type %q registered twice", typ))
	}
	for _, def := range serves {
		if err := r.catalog.add(typ, def); err != nil {
			panic(fmt.Sprintf("environ: provisioner type %q: %v", typ, err))
		}
	}
	r.initializers[typ] = fn
}

// Catalog returns the resource types the registered provisioner types serve. It is the
// registry's own, not a copy: register every provisioner type before using it.
func (r *Registry) Catalog() *Catalog { return r.catalog }

// Types returns the registered provisioner types, sorted.
func (r *Registry) Types() []string {
	types := make([]string, 0, len(r.initializers))
	for t := range r.initializers {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

// Spec is one entry of a provisioner set: {"type": ..., "spec": {...}}, and optionally the
// settings of the provisioner's circuit breaker ({"breaker": {...}}, see BreakerSpec).
type Spec struct {
	Type    string          `json:"type"`
	Spec    json.RawMessage `json:"spec"`
	Breaker *BreakerSpec    `json:"breaker,omitempty"`
}

// Set is a named set of brokers and the name of the default one.
type Set struct {
	Default  string
	Environs map[string]Environ
	Specs    map[string]Spec
	// Catalog is the catalog of the registry that built the set, with the types its
	// provisioners' specs define (TypeDefiner): the resource types the agent serves. Nil in a set built by hand, which then serves no type to a claim's start
	// (ServedTypes) and tells no unknown type from an unsupported one (CheckType).
	Catalog *Catalog
}

// Names returns the provisioner names, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.Environs))
	for n := range s.Environs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Get returns the broker named name; an empty name means the default.
func (s *Set) Get(name string) (Environ, string, error) {
	if name == "" {
		name = s.Default
	}
	env, ok := s.Environs[name]
	if !ok {
		return nil, name, fmt.Errorf("provisioner %q is not in the provisioner set (known: %s)", name, strings.Join(s.Names(), ", "))
	}
	return env, name, nil
}

// ServedTypes lists the resource types of the set's catalog that env serves (none when the
// set has no catalog).
func (s *Set) ServedTypes(env Environ) []domain.ResourceType {
	if s.Catalog == nil {
		return nil
	}
	var served []domain.ResourceType
	for _, t := range s.Catalog.order {
		if env.Supports(t) {
			served = append(served, t)
		}
	}
	return served
}

// CheckType returns an *UnknownTypeError, naming the served types, when no environ of the
// agent serves type t; nil when one does, or when the set has no catalog to tell.
func (s *Set) CheckType(t domain.ResourceType) error {
	if s.Catalog == nil {
		return nil
	}
	_, err := s.Catalog.Lookup(t)
	return err
}

// Close closes every broker and returns the first error.
func (s *Set) Close() error {
	var first error
	for _, name := range s.Names() {
		if err := s.Environs[name].Close(); err != nil && first == nil {
			first = fmt.Errorf("close provisioner %q: %w", name, err)
		}
	}
	return first
}

// NewSet builds every provisioner of setJSON, a JSON object mapping names to Specs, and checks
// that defaultName names one of them. An empty defaultName is allowed when the set has exactly
// one provisioner, which becomes the default. The JSON may carry comments (// and /* */) and
// trailing commas. Errors name the provisioner, the field and its line and column.
func (r *Registry) NewSet(setJSON []byte, defaultName string, deps Deps) (*Set, error) {
	specs, src, err := parseSet(setJSON)
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("provisioner set is empty: it must name at least one provisioner, e.g. {\"pool\": {\"type\": \"static\", \"spec\": {...}}}")
	}
	set := &Set{Default: defaultName, Environs: make(map[string]Environ, len(specs)), Specs: specs, Catalog: r.catalog}
	names := make([]string, 0, len(specs))
	for name := range specs {
		names = append(names, name)
	}
	sort.Strings(names)
	if set.Default == "" {
		if len(names) != 1 {
			return nil, fmt.Errorf("no default provisioner: set BERTH_DEFAULT_PROVISIONER (or --default-provisioner) to one of %s", strings.Join(names, ", "))
		}
		set.Default = names[0]
	}
	if _, ok := specs[set.Default]; !ok {
		return nil, fmt.Errorf("default provisioner %q is not in the provisioner set: use one of %s", set.Default, strings.Join(names, ", "))
	}
	for _, name := range names {
		spec := specs[name]
		if spec.Type == "" {
			set.Close()
			return nil, fmt.Errorf("provisioner %q, %s: field \"type\" is missing: use one of %s", name, src.at(name), strings.Join(r.Types(), ", "))
		}
		init, ok := r.initializers[spec.Type]
		if !ok {
			set.Close()
			return nil, fmt.Errorf("provisioner %q, %s: type %q is unknown: use one of %s", name, src.at(name, "type"), spec.Type, strings.Join(r.Types(), ", "))
		}
		if _, _, err := spec.Breaker.Settings(); err != nil {
			set.Close()
			return nil, fmt.Errorf("provisioner %q, %s: %w", name, src.at(breakerField(name, err)...), err)
		}
		d := deps
		if d.Logger == nil {
			d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
		d.Logger = d.Logger.With("provisioner", name)
		env, err := init(name, spec.Spec, d)
		if err != nil {
			set.Close()
			return nil, fmt.Errorf("provisioner %q (%s), %s: %w", name, spec.Type, src.at(specField(name, err)...), err)
		}
		set.Environs[name] = env
		if definer, ok := env.(TypeDefiner); ok && len(definer.DefinedTypes()) > 0 {
			if set.Catalog == r.catalog {
				set.Catalog = r.catalog.clone()
			}
			for _, def := range definer.DefinedTypes() {
				if err := set.Catalog.add(spec.Type, def); err != nil {
					set.Close()
					return nil, fmt.Errorf("provisioner %q (%s), %s: %w", name, spec.Type, src.at(name, "spec", "types", string(def.Name)), err)
				}
			}
		}
	}
	return set, nil
}

// ParseSetSpecs reads the entries of a provisioner set's text (JSON, comments and trailing
// commas allowed) without building any: for what must be known of a set before it is built,
// such as the resource types its external provisioners declare.
func ParseSetSpecs(text []byte) (map[string]Spec, error) {
	specs, _, err := parseSet(text)
	return specs, err
}

// parseSet reads the set's text (JSON, comments and trailing commas allowed) into its specs,
// each Spec.Spec standard JSON, and returns the source its errors point into.
func parseSet(text []byte) (map[string]Spec, *setSource, error) {
	if len(bytes.TrimSpace(text)) == 0 {
		return nil, nil, fmt.Errorf("provisioner set is empty: set BERTH_PROVISIONER_SET_JSON or --provisioners FILE")
	}
	src, setJSON, err := parseSetSource(text)
	if err != nil {
		return nil, nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(setJSON, &raw); err != nil {
		return nil, nil, fmt.Errorf("provisioner set, %s: not a JSON object of name -> {type, spec}: %w", src.at(), err)
	}
	if name, dup := duplicateName(setJSON); dup {
		return nil, nil, fmt.Errorf("provisioner set, %s: provisioner %q is defined twice: give each provisioner its own name", src.member(name, 1), name)
	}
	specs := make(map[string]Spec, len(raw))
	for name, msg := range raw {
		if strings.TrimSpace(name) == "" {
			return nil, nil, fmt.Errorf("provisioner set, %s: a provisioner has an empty name", src.member(name, 0))
		}
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		var spec Spec
		if err := dec.Decode(&spec); err != nil {
			return nil, nil, fmt.Errorf("provisioner %q, %s: want {\"type\": ..., \"spec\": {...}}: %w", name, src.at(name), err)
		}
		specs[name] = spec
	}
	return specs, src, nil
}

// duplicateName finds a name the set object defines more than once, which decoding into a map
// would silently resolve to the last definition. setJSON is known to be a valid JSON object.
func duplicateName(setJSON []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(setJSON))
	if _, err := dec.Token(); err != nil {
		return "", false
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		name, _ := tok.(string)
		if seen[name] {
			return name, true
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// ResourceSpecReporter is implemented by environs whose resources are shaped by less than
// their whole spec (settings such as health probing that no resource carries) or by more
// than it (files the spec names). Set.Fingerprint uses it in place of the spec.
type ResourceSpecReporter interface {
	// ResourceSpec returns what of the environ's configuration its resources are built from,
	// as a value encoding/json can marshal; it must not change while the environ runs.
	ResourceSpec() any
}

// Fingerprint returns a digest ("sha256:" and hex) of what the resources of provisioner name
// are built from: its type and canonical spec JSON (keys sorted, no insignificant space), or
// what its environ reports as a ResourceSpecReporter. Two sets that would build a
// provisioner's resources alike give it the same fingerprint, however their JSON is laid out.
func (s *Set) Fingerprint(name string) (string, error) {
	spec, ok := s.Specs[name]
	if !ok {
		return "", fmt.Errorf("provisioner %q is not in the provisioner set (known: %s)", name, strings.Join(s.Names(), ", "))
	}
	var shape any = spec.Spec
	if r, ok := s.Environs[name].(ResourceSpecReporter); ok {
		shape = r.ResourceSpec()
	}
	return digest(map[string]any{"type": spec.Type, "spec": shape})
}

// Digest returns a digest of the whole set: the default, every provisioner's canonical spec
// and its fingerprint. Two sets with the same digest build the same environs, so replacing
// one with the other changes nothing.
func (s *Set) Digest() (string, error) {
	provisioners := make(map[string]any, len(s.Specs))
	for _, name := range s.Names() {
		fp, err := s.Fingerprint(name)
		if err != nil {
			return "", err
		}
		spec := s.Specs[name]
		p := map[string]any{"type": spec.Type, "spec": spec.Spec, "fingerprint": fp}
		if spec.Breaker != nil {
			p["breaker"] = spec.Breaker
		}
		provisioners[name] = p
	}
	return digest(map[string]any{"default": s.Default, "provisioners": provisioners})
}

// digest hashes the canonical JSON of v. Re-decoding with numbers kept as written and
// encoding again sorts every object's keys and drops insignificant space.
func digest(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode the spec to fingerprint it: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return "", fmt.Errorf("decode the spec to fingerprint it: %w", err)
	}
	canonical, err := json.Marshal(generic)
	if err != nil {
		return "", fmt.Errorf("encode the spec to fingerprint it: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
