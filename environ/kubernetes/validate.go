package kubernetes

import (
	"fmt"

	"github.com/berth-dev/berth/environ"
)

// sampleResourceID is the id of the resource templates are test-rendered with at New.
const sampleResourceID = "00000000-0000-4000-8000-000000000000"

// checkTemplates renders the templates of every resource type for a sample resource of it
// and checks what they render, so that a broken template is an error when the configuration
// is loaded, not when the first resource needs it.
func (e *kubeEnviron) checkTemplates() error {
	for _, t := range resourceTypes {
		data, err := e.templateData(&environ.Resource{ID: sampleResourceID, Type: t.name}, t, t.sampleArgs)
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
	}
	return nil
}
