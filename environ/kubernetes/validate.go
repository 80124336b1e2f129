package kubernetes

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// sampleResourceID is the id of the resource templates are test-rendered with at New.
const sampleResourceID = "00000000-0000-4000-8000-000000000000"

// checkTemplates renders every template for a sample runtime and a sample ClickHouse resource,
// so that a broken template is an error when the configuration is loaded, not when the first
// resource needs it. It also keeps the runtime pod template's tolerations for capacity.
func (e *kubeEnviron) checkTemplates() error {
	rt, err := e.templateData(&environ.Resource{ID: sampleResourceID, Type: domain.ResourceTypeRuntime}, map[string]any{"slots": 1})
	if err != nil {
		return fmt.Errorf("sample runtime: %w", err)
	}
	objects, err := e.templates.render(runtimeTemplates, rt, e.spec.Namespace)
	if err != nil {
		return err
	}
	if n := countKind(objects, "Deployment"); n != 1 {
		return &domain.FieldError{Field: "template_paths." + TemplateDeployment, Msg: fmt.Sprintf("must render exactly one Deployment, rendered %d", n)}
	}
	if countKind(objects, "StatefulSet") != 0 {
		return &domain.FieldError{Field: "template_paths." + TemplateDeployment, Msg: "must not render a StatefulSet: runtimes run as a Deployment"}
	}
	for _, obj := range objects {
		if obj.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
			return &domain.FieldError{Field: "template_paths." + TemplateDeployment, Msg: err.Error()}
		}
		e.tolerations = d.Spec.Template.Spec.Tolerations
	}
	ch, err := e.templateData(&environ.Resource{ID: sampleResourceID, Type: domain.ResourceTypeClickHouse}, nil)
	if err != nil {
		return fmt.Errorf("sample clickhouse: %w", err)
	}
	objects, err = e.templates.render(clickhouseTemplates, ch, e.spec.Namespace)
	if err != nil {
		return err
	}
	return clickhouseObjectsValid(objects)
}
