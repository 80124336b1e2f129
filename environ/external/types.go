package external

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// DeclaredTypes returns the definitions of the resource types the external provisioners
// of setJSON declare (spec "types"), for the registry to serve: the definition known
// already (known, e.g. runtime) for a type a built-in environ serves too, else one whose
// args are any JSON object, which the broker checks when it reconciles (refusing bad args
// as permanent, naming the field). A set that cannot be read declares nothing: building
// it reports why.
func DeclaredTypes(setJSON []byte, known *environ.Catalog) []*environ.TypeDef {
	if len(setJSON) == 0 {
		return nil
	}
	specs, err := environ.ParseSetSpecs(setJSON)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	for _, s := range specs {
		if s.Type != Type {
			continue
		}
		var declared struct {
			Types []string `json:"types"`
		}
		if json.Unmarshal(s.Spec, &declared) != nil {
			continue
		}
		for _, t := range declared.Types {
			if t != "" && strings.TrimFunc(t, isNameRune) == "" {
				names[t] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for t := range names {
		sorted = append(sorted, t)
	}
	sort.Strings(sorted)
	defs := make([]*environ.TypeDef, 0, len(sorted))
	for _, t := range sorted {
		if known != nil {
			if def, err := known.Lookup(domain.ResourceType(t)); err == nil {
				defs = append(defs, def)
				continue
			}
		}
		defs = append(defs, brokerChecked(domain.ResourceType(t)))
	}
	return defs
}

// brokerChecked is the definition of a type only an external broker serves.
func brokerChecked(t domain.ResourceType) *environ.TypeDef {
	return &environ.TypeDef{
		Name: t,
		Help: "served by an external broker, which checks its args",
		Validate: func(args map[string]any) error {
			for k, v := range args {
				if _, err := json.Marshal(v); err != nil {
					return &domain.FieldError{Field: "args." + k, Msg: "is not a JSON value"}
				}
			}
			return nil
		},
	}
}
