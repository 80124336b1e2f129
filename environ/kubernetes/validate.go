package kubernetes

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/berth-dev/berth/domain"

	"github.com/berth-dev/berth/environ"
)

// sampleResourceID is the id of the resource templates are test-rendered with at New.
const sampleResourceID = "00000000-0000-4000-8000-000000000000"

// checkTemplates renders the templates of every resource type for a sample resource of it
// and checks what they render, so that a broken template is an error when the configuration
// is loaded, not when the first resource needs it.
func (e *kubeEnviron) checkTemplates() error {
	for i := range e.types {
		t := &e.types[i]
		if t.defined != nil {
			if err := t.defined.validate(t.sampleArgs); err != nil {
				var fe *domain.FieldError
				if errors.As(err, &fe) {
					fe.Field = "types." + string(t.name) + ".example_" + fe.Field
					fe.Msg += ": give example_args the templates can be test-rendered with, or defaults in the schema"
				}
				return err
			}
		}
		data, err := e.templateData(&environ.Resource{ID: sampleResourceID, Type: t.name}, *t, t.sampleArgs)
		if err != nil {
			return fmt.Errorf("sample %s: %w", t.name, err)
		}
		objects, err := e.templates.render(t.templates, data, e.spec.Namespace)
		if err != nil {
			return err
		}
		if err := t.checkSample(e, objects); err != nil {
			return err
		}
		if t.defined != nil {
			if t.workload.kind == "" {
				// A type the spec defines runs as the one workload its templates render.
				t.workload = workloadOfSample(objects)
			}
			if _, err := t.defined.finish(*t, data, objects); err != nil {
				return err
			}
		}
	}
	return nil
}

// defineTypes compiles the types the spec defines and parses their templates into set (with
// their digests): it returns the environ's table of types, the built-in ones first, and the
// catalog's definitions of the defined ones, both sorted by name after the built-ins.
func defineTypes(specs map[string]*TypeSpec, set templateSet, digests map[string]string) ([]resourceType, []*environ.TypeDef, error) {
	types := slices.Clone(resourceTypes)
	keys, err := loadDefinedTemplates(specs, set, digests)
	if err != nil {
		return nil, nil, err
	}
	names := slices.Sorted(maps.Keys(specs))
	defs := make([]*environ.TypeDef, 0, len(names))
	for _, name := range names {
		d, err := compileType(name, specs[name], nil)
		if err != nil {
			return nil, nil, err
		}
		types = append(types, d.resourceType(keys[name]))
		defs = append(defs, d.typeDef())
	}
	return types, defs, nil
}
