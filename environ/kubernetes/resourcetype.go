package kubernetes

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// resourceType is what the environ does for one resource type it serves: everything that
// differs between types, so that the rest of the environ looks a type up once (typeOf) and
// never asks for its name, as kinds does for the kinds of objects. Each type's entry is in
// its own file (runtime.go, clickhouse.go).
type resourceType struct {
	name domain.ResourceType
	// prefix starts the name of the type's objects, before the provision id.
	prefix string
	// templates are the template_paths keys the type renders, in apply order.
	templates []string
	// workload is the kind of the one object that runs the resource: its rollout is the
	// resource's readiness (ready.go), and Hibernate scales it to zero.
	workload workloadKind
	// hibernates says the resource can hibernate: its workload scaled to zero, every other
	// object (and its data) kept.
	hibernates bool
	// slotQuota says the resource's slots count against the spec's slot_quota.
	slotQuota bool
	// sampleArgs are the args of the sample resource New renders the templates for.
	sampleArgs map[string]any
	// prepare decodes the resource's args and fills in the type's part of what its
	// templates see: the image, the slots (sizing turns them into requests) and any names
	// of its own. Its errors are *domain.FieldError.
	prepare func(e *kubeEnviron, args map[string]any, data *TemplateData) error
	// checkSample checks the objects of the sample render at New: those the type needs are
	// there, those it cannot run on are not.
	checkSample func(e *kubeEnviron, objects []*unstructured.Unstructured) error
	// extras, when set, makes sure the objects the type keeps outside its templates exist
	// (ClickHouse's password Secret), before the templates are applied, and returns the
	// annotations of the workload's pod template that roll its pods when those objects change.
	extras func(ctx context.Context, e *kubeEnviron, cs kubernetes.Interface, r *environ.Resource, data TemplateData, userLabels map[string]string) (map[string]string, error)
	// annotations, when set, are the annotations of the workload object itself.
	annotations func(data TemplateData) map[string]string
	// config is the config the type reports, from what was rendered. It never carries a
	// secret: it names where one is kept instead.
	config func(e *kubeEnviron, d *desired) map[string]any
	// defined is the type's definition: a spec's (its "types"), or a built-in type's
	// embedded one. It checks the render (one workload), adds the readiness probe and
	// renders the config, unless config above says it in Go.
	defined *definedType
}

// resourceTypes are the built-in resource types, in the order New checks their templates.
// An environ serves them and the types its spec defines (kubeEnviron.types).
var resourceTypes = []resourceType{runtimeType, clickhouseType}

// templateKeys are the template_paths keys of every type.
var templateKeys = func() []string {
	var keys []string
	for _, t := range resourceTypes {
		keys = append(keys, t.templates...)
	}
	return keys
}()

// lookupType returns the entry of built-in resource type name, and whether there is one.
func lookupType(name domain.ResourceType) (resourceType, bool) {
	for _, t := range resourceTypes {
		if t.name == name {
			return t, true
		}
	}
	return resourceType{}, false
}

// lookupType returns the entry of resource type name, built in or defined by the spec, and
// whether the environ serves it.
func (e *kubeEnviron) lookupType(name domain.ResourceType) (resourceType, bool) {
	for _, t := range e.types {
		if t.name == name {
			return t, true
		}
	}
	return resourceType{}, false
}

// servedTypes names the types e serves for errors: "runtime and clickhouse".
func (e *kubeEnviron) servedTypes() string {
	names := make([]string, len(e.types))
	for i, t := range e.types {
		names[i] = string(t.name)
	}
	last := len(names) - 1
	if last == 0 {
		return names[0]
	}
	return strings.Join(names[:last], ", ") + " and " + names[last]
}

// typeOf returns the entry of r's type; a type the environ does not serve is a permanent
// error naming the provisioner, the type and the types it serves.
func (e *kubeEnviron) typeOf(r *environ.Resource) (resourceType, error) {
	t, ok := e.lookupType(r.Type)
	if !ok {
		return resourceType{}, environ.Permanent(fmt.Errorf("provisioner %q is of type %s, which provisions %s resources, not %s: choose a provisioner that supports %s",
			e.name, Type, e.servedTypes(), r.Type, r.Type))
	}
	return t, nil
}

// size turns data's slots into the requests its templates see: the spec's per-slot sizing
// times the slots. In bounds: prepare keeps the slots at most the spec's maxSlots.
func (e *kubeEnviron) size(data *TemplateData) {
	data.CPU = e.spec.CPUPerSlot * data.Slots
	data.MemoryGB = e.spec.MemoryGBPerSlot * data.Slots
	data.Memory = fmt.Sprintf("%dGi", data.MemoryGB)
	data.StorageBytes = e.spec.StorageBytesPerSlot * int64(data.Slots)
	data.Storage = quantity(data.StorageBytes)
}
