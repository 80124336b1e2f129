package kubernetes

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	runtimetype "github.com/berth-dev/berth/environ/runtime"
)

// runtimeDefinition is the runtime type's definition, in the form a spec's "types" takes:
// its object name prefix, its templates (template_paths keys) and that it hibernates.
//
//go:embed types/runtime/type.json
var runtimeDefinition []byte

// runtimeType is the runtime resource type: a Deployment of the spec's image (args.version
// its tag) sized by its slots, with a data volume, a Service and HTTP and gRPC Ingresses.
// Its definition says what data can; the rest is Go: its args are read by environ/runtime's
// TypeDef, bounded by the spec's sizing, its slots count against the slot quota and are on
// its Deployment, its sample render keeps the Deployment's tolerations, and its config
// (where to reach it and its sizing, the volume's as kept) has numbers.
var runtimeType = func() resourceType {
	t := builtinType(domain.ResourceTypeRuntime, runtimeDefinition, func(args map[string]any) error {
		_, err := runtimetype.DecodeArgs(args)
		return err
	}, deployments)
	t.slotQuota = true
	t.sampleArgs = map[string]any{"slots": 1}
	t.prepare = prepareRuntime
	t.checkSample = checkRuntimeSample
	t.annotations = func(data TemplateData) map[string]string {
		return map[string]string{AnnotationSlots: fmt.Sprint(data.Slots)}
	}
	t.config = func(_ *kubeEnviron, d *desired) map[string]any {
		return (&runtimetype.Config{
			Host:         d.data.Host,
			Audience:     d.data.Host,
			CPU:          d.data.CPU,
			MemoryGB:     d.data.MemoryGB,
			StorageBytes: d.storageBytes,
		}).AsMap()
	}
	return t
}()

// prepareRuntime takes a runtime's slots, bounded by the spec's sizing, and its image from args.
func prepareRuntime(e *kubeEnviron, args map[string]any, data *TemplateData) error {
	a, err := runtimetype.DecodeArgs(args)
	if err != nil {
		return err
	}
	if most := e.spec.maxSlots(); a.Slots > most.slots {
		// More slots would overflow the runtime's sizing: no cluster can hold them.
		return environ.Permanent(&domain.NeverFitsError{Provisioner: e.name, Slots: a.Slots, Largest: most.slots,
			Limit: fmt.Sprintf("%s %d caps a runtime at %d", most.field, most.perSlot, most.slots),
			Raise: fmt.Sprintf("lower %s in the provisioner set", most.field)})
	}
	data.Slots = a.Slots
	data.Image, err = imageWithTag(e.spec.Image, a.Version)
	return err
}

// checkRuntimeSample checks that a runtime renders exactly one Deployment and no
// StatefulSet, and keeps the Deployment's tolerations: nodes with other taints cannot take
// runtimes and do not count as capacity.
func checkRuntimeSample(e *kubeEnviron, objects []*unstructured.Unstructured) error {
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
	return nil
}

var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// imageWithTag returns image with its tag (or digest) replaced by version; an empty version
// leaves image as the spec gives it.
func imageWithTag(image, version string) (string, error) {
	if version == "" {
		return image, nil
	}
	if !tagPattern.MatchString(version) {
		return "", &domain.FieldError{Field: "args.version", Msg: fmt.Sprintf("%q cannot be an image tag: use letters, digits, '_', '.' and '-' (e.g. 0.48.1)", version)}
	}
	base, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		base = base[:i]
	}
	return base + ":" + version, nil
}
