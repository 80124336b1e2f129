package environ

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/berth-dev/berth/domain"
)

// Catalog is what the registry knows of resource types: which are served, by which
// provisioner types, and each one's definition. It is a domain.TypeCatalog, and the source
// of the CLI's --type help and completion and of its --arg parsing.
type Catalog struct {
	order    []domain.ResourceType // in the order the types were first registered
	defs     map[domain.ResourceType]*TypeDef
	servedBy map[domain.ResourceType][]string // provisioner types, in registration order
}

var _ domain.TypeCatalog = (*Catalog)(nil)

// TypeNames lists the served types, in the order they were first registered.
func (c *Catalog) TypeNames() []domain.ResourceType { return slices.Clone(c.order) }

// Names lists the served types for messages: "runtime, clickhouse".
func (c *Catalog) Names() string {
	names := make([]string, len(c.order))
	for i, t := range c.order {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// Lookup returns the definition of type t, or a *UnknownTypeError naming the served types.
func (c *Catalog) Lookup(t domain.ResourceType) (*TypeDef, error) {
	def, ok := c.defs[t]
	if !ok {
		return nil, &UnknownTypeError{Type: t, Served: c.TypeNames()}
	}
	return def, nil
}

// ServedBy lists the provisioner types that serve type t (none when no environ does).
func (c *Catalog) ServedBy(t domain.ResourceType) []string { return slices.Clone(c.servedBy[t]) }

// ValidateArgs checks args against the schema of type t (domain.TypeCatalog): a wrong arg is
// a *domain.FieldError naming it, and so is a type no environ serves (on the field "type").
func (c *Catalog) ValidateArgs(t domain.ResourceType, args map[string]any) error {
	def, err := c.Lookup(t)
	if err != nil {
		return &domain.FieldError{Field: "type", Msg: err.(*UnknownTypeError).fix()}
	}
	return def.Validate(args)
}

// ParseArgFlags turns the CLI's --arg key=value pairs into args of type t (TypeDef's
// ParseArgFlags).
func (c *Catalog) ParseArgFlags(t domain.ResourceType, pairs []string) (map[string]any, error) {
	def, err := c.Lookup(t)
	if err != nil {
		return nil, &domain.FieldError{Field: "type", Msg: err.(*UnknownTypeError).fix()}
	}
	return def.ParseArgFlags(pairs)
}

// Help lists every served type with its args, one per line, for the CLI's help:
//
//	runtime      slots (whole number, 1 to 1000000; default 1), version (string)
//	clickhouse   takes no args
func (c *Catalog) Help() string {
	width := 0
	for _, t := range c.order {
		width = max(width, len(t))
	}
	var b strings.Builder
	for _, t := range c.order {
		fmt.Fprintf(&b, "  %-*s   %s\n", width, t, c.defs[t].ArgsHelp())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// UnknownTypeError is a resource type no environ of the agent serves: a client wrote the
// row without the CLI's checks (plain SQL), or the agent was built without the environ that
// serves it. Retrying cannot help until the agent serves the type, so it is Permanent.
type UnknownTypeError struct {
	Type   domain.ResourceType
	Served []domain.ResourceType
}

func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("resource type %q is served by no provisioner of this agent (it serves %s): delete the resource, or retry it once an agent whose environs serve the type runs",
		e.Type, e.served())
}

// fix is the error as a field error on "type" says it.
func (e *UnknownTypeError) fix() string {
	return fmt.Sprintf("%q is not a resource type: use one of %s", e.Type, e.served())
}

func (e *UnknownTypeError) served() string {
	names := make([]string, len(e.Served))
	for i, t := range e.Served {
		names[i] = string(t)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// add records that provisioner type provisioner serves def.
func (c *Catalog) add(provisioner string, def *TypeDef) error {
	if err := def.check(); err != nil {
		return err
	}
	if known, ok := c.defs[def.Name]; ok && known != def {
		if def.Digest == "" || known.Digest != def.Digest {
			return fmt.Errorf("resource type %q is defined twice, differently: environs that serve one type share its TypeDef, and provisioners that define it in their specs define it alike (or give it another name)", def.Name)
		}
		if slices.Contains(c.servedBy[def.Name], provisioner) {
			return nil
		}
	}
	if _, ok := c.defs[def.Name]; !ok {
		c.order = append(c.order, def.Name)
		c.defs[def.Name] = def
	}
	c.servedBy[def.Name] = append(c.servedBy[def.Name], provisioner)
	return nil
}

// Include adds to c the types of other that c does not serve yet, with the provisioner
// types that serve them (a CLI's catalog learns the types a provisioner set defines, see
// TypeDefiner). A type both serve keeps c's definition.
func (c *Catalog) Include(other *Catalog) {
	for _, t := range other.order {
		if _, ok := c.defs[t]; ok {
			continue
		}
		c.order = append(c.order, t)
		c.defs[t] = other.defs[t]
		c.servedBy[t] = slices.Clone(other.servedBy[t])
	}
}

// clone returns a copy of c that types can be added to without changing c.
func (c *Catalog) clone() *Catalog {
	out := &Catalog{order: slices.Clone(c.order), defs: maps.Clone(c.defs), servedBy: make(map[domain.ResourceType][]string, len(c.servedBy))}
	for t, by := range c.servedBy {
		out.servedBy[t] = slices.Clone(by)
	}
	return out
}

func newCatalog() *Catalog {
	return &Catalog{defs: map[domain.ResourceType]*TypeDef{}, servedBy: map[domain.ResourceType][]string{}}
}
