package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// desired is what a resource's objects should be.
type desired struct {
	t            resourceType
	data         TemplateData
	objects      []*unstructured.Unstructured // in apply order
	checksum     string
	storageBytes int64  // the data volume's size after growth-only adjustment
	notice       string // e.g. a volume not shrunk
	// read holds the live objects rendering already read (a claim, to keep it from
	// shrinking), by kind and name, so that drift does not read them again.
	read map[string]liveObject
	// userLabels are the resource's own labels, under LabelPrefix, on every object.
	userLabels map[string]string
	// asleep says the resource is rendered hibernated: its workload at zero replicas.
	asleep bool
	// config is the config the type's definition templates (empty when its config is Go's).
	config map[string]any
}

// liveObject is what a read of one object found: the object, or that it is missing.
type liveObject struct {
	obj     metav1.Object
	missing bool
}

// objectKey is an object's key in desired.read.
func objectKey(kind, name string) string { return kind + "/" + name }

// templateData is what r's templates see, before any lookup in the cluster: the names and
// host every type has, what t makes of r's args, and the sizing of the slots.
func (e *kubeEnviron) templateData(r *environ.Resource, t resourceType, args map[string]any) (TemplateData, error) {
	pid := strings.ToLower(strings.ReplaceAll(r.ID, "-", ""))
	name := t.prefix + pid
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 || validation.IsValidLabelValue(r.ID) != nil {
		return TemplateData{}, fmt.Errorf("resource id %q cannot name Kubernetes objects", r.ID)
	}
	host := strings.ReplaceAll(e.spec.Host, "*", pid)
	u, err := url.Parse(host)
	if err != nil {
		return TemplateData{}, errors.New("host: not a URL once '*' is replaced by the provision id (not shown: it may hold credentials)")
	}
	data := TemplateData{
		Name:        name,
		Namespace:   e.spec.Namespace,
		ResourceID:  r.ID,
		ProvisionID: pid,
		Provisioner: e.name,
		Type:        string(r.Type),
		Host:        host,
		HostName:    u.Hostname(),
		DataDir:     e.spec.DataDir,
		Slots:       1,
	}
	if err := t.prepare(e, args, &data); err != nil {
		return TemplateData{}, err
	}
	e.size(&data)
	return data, nil
}

// resourceLabels returns the resource's labels as its objects carry them, under LabelPrefix.
// The domain validates labels where clients set them; a row written with SQL may hold a key
// or value Kubernetes refuses, and that is said here rather than by the API server.
func resourceLabels(labels map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		key := LabelPrefix + k
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, &domain.FieldError{Field: "labels", Msg: fmt.Sprintf("key %q cannot label Kubernetes objects (%s): relabel the resource", k, strings.Join(errs, "; "))}
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, &domain.FieldError{Field: "labels", Msg: fmt.Sprintf("value %q of %q cannot label Kubernetes objects (%s): relabel the resource", v, k, strings.Join(errs, "; "))}
		}
		out[key] = v
	}
	return out, nil
}

// desired renders r's objects, of type t, with data, labels them, keeps volumes from
// shrinking and computes their checksum. It makes sure the objects t keeps outside its
// templates (ClickHouse's password Secret) exist first.
//
// The resource's own labels (userLabels, already under LabelPrefix) and asleep (its
// workload at zero replicas) are set after the checksum: relabelling a resource, or
// hibernating and waking it, changes only those fields, never the pod template, so neither
// rolls its pods. drift compares them on their own.
func (e *kubeEnviron) desired(ctx context.Context, cs kubernetes.Interface, r *environ.Resource, t resourceType, data TemplateData, userLabels map[string]string, asleep bool) (*desired, error) {
	var podAnnotations map[string]string
	if t.extras != nil {
		var err error
		if podAnnotations, err = t.extras(ctx, e, cs, r, data, userLabels); err != nil {
			return nil, err
		}
	}
	objects, err := e.templates.render(t.templates, data, e.spec.Namespace)
	if err != nil {
		return nil, fmt.Errorf("render templates: %w", err)
	}
	sort.SliceStable(objects, func(i, j int) bool { return rankOf(objects[i]) < rankOf(objects[j]) })
	d := &desired{t: t, data: data, objects: objects, storageBytes: data.StorageBytes, read: make(map[string]liveObject), userLabels: userLabels, asleep: asleep}
	if t.defined != nil {
		if d.config, err = t.defined.finish(t, data, objects); err != nil {
			return nil, environ.Permanent(err)
		}
	}
	labels := e.labels(r.ID, r.Type)
	var notices []string
	for _, obj := range objects {
		obj.SetLabels(merge(obj.GetLabels(), labels))
		switch obj.GetKind() {
		case "Deployment", "StatefulSet":
			podLabels, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
			if err := unstructured.SetNestedStringMap(obj.Object, merge(podLabels, labels), "spec", "template", "metadata", "labels"); err != nil {
				return nil, fmt.Errorf("label %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetKind() == t.workload.kind && t.annotations != nil {
				obj.SetAnnotations(merge(obj.GetAnnotations(), t.annotations(data)))
			}
			for k, v := range podAnnotations {
				if err := setPodAnnotation(obj, k, v); err != nil {
					return nil, err
				}
			}
		case "PersistentVolumeClaim":
			kept, notice, live, err := e.growOnly(ctx, cs, obj)
			if err != nil {
				return nil, err
			}
			d.read[objectKey(obj.GetKind(), obj.GetName())] = live
			d.storageBytes = kept
			if notice != "" {
				notices = append(notices, notice)
			}
		}
	}
	d.notice = strings.Join(notices, "; ")
	sum := sha256.New()
	for _, obj := range objects {
		js, err := json.Marshal(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		sum.Write(js)
		sum.Write([]byte("\n"))
	}
	d.checksum = hex.EncodeToString(sum.Sum(nil))
	stamp := map[string]string{AnnotationChecksum: d.checksum}
	for _, obj := range objects {
		obj.SetAnnotations(merge(obj.GetAnnotations(), stamp))
		obj.SetLabels(merge(withoutPrefix(obj.GetLabels(), LabelPrefix), userLabels))
		if k := obj.GetKind(); k == "Deployment" || k == "StatefulSet" {
			// On the pod template too, so that any change of the manifests rolls the pods.
			if err := setPodAnnotation(obj, AnnotationChecksum, d.checksum); err != nil {
				return nil, err
			}
			if asleep {
				if err := unstructured.SetNestedField(obj.Object, int64(0), "spec", "replicas"); err != nil {
					return nil, fmt.Errorf("scale %s %s to zero: %w", k, obj.GetName(), err)
				}
				obj.SetAnnotations(merge(obj.GetAnnotations(), map[string]string{AnnotationHibernated: "true"}))
			}
		}
	}
	return d, nil
}

func setPodAnnotation(obj *unstructured.Unstructured, key, value string) error {
	ann, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "annotations")
	if err := unstructured.SetNestedStringMap(obj.Object, merge(ann, map[string]string{key: value}), "spec", "template", "metadata", "annotations"); err != nil {
		return fmt.Errorf("annotate %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// growOnly keeps a PVC from shrinking: when the live claim asks for more than obj, obj is set
// to the live size and a notice says so. A claim still pending keeps its size too, because
// only a bound claim can change it. It returns the size obj now asks for and the live claim
// it read.
func (e *kubeEnviron) growOnly(ctx context.Context, cs kubernetes.Interface, obj *unstructured.Unstructured) (int64, string, liveObject, error) {
	want, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "resources", "requests", "storage")
	wantQ, err := resource.ParseQuantity(fmt.Sprint(want))
	if err != nil {
		return 0, "", liveObject{}, fmt.Errorf("persistentvolumeclaim %s: spec.resources.requests.storage %q is not a quantity", obj.GetName(), fmt.Sprint(want))
	}
	live, err := cs.CoreV1().PersistentVolumeClaims(e.spec.Namespace).Get(ctx, obj.GetName(), metaGet)
	if apierrors.IsNotFound(err) {
		return wantQ.Value(), "", liveObject{missing: true}, nil
	}
	if err != nil {
		return 0, "", liveObject{}, fmt.Errorf("get persistentvolumeclaim %s: %w", obj.GetName(), explainForbidden(err))
	}
	read := liveObject{obj: live}
	liveQ, ok := live.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || liveQ.Cmp(wantQ) == 0 {
		return wantQ.Value(), "", read, nil
	}
	if liveQ.Cmp(wantQ) < 0 {
		if live.Status.Phase != corev1.ClaimPending {
			return wantQ.Value(), "", read, nil
		}
		// The API refuses to change the size of a claim that is not bound yet (it is bound
		// when its first pod is scheduled). Keeping the live size lets the rest of the
		// resource roll out; the checksum then differs from the grown one, so the first
		// reconcile or health check after binding grows the claim.
		if err := unstructured.SetNestedField(obj.Object, liveQ.String(), "spec", "resources", "requests", "storage"); err != nil {
			return 0, "", liveObject{}, err
		}
		return liveQ.Value(), fmt.Sprintf("volume not grown yet: %s requested, %s kept until the claim is bound (its pod is scheduled)", wantQ.String(), liveQ.String()), read, nil
	}
	if err := unstructured.SetNestedField(obj.Object, liveQ.String(), "spec", "resources", "requests", "storage"); err != nil {
		return 0, "", liveObject{}, err
	}
	return liveQ.Value(), fmt.Sprintf("volume not shrunk: %s requested, %s kept; volumes only grow", wantQ.String(), liveQ.String()), read, nil
}

// result is r with the State and Config of d. Neither carries a secret (the ClickHouse
// password): the config names where it is kept. A resource whose stored config still has a
// DSN with the password (written before the DSN lost it) gets this config from its next
// reconcile or health check, which replace the stored one when it differs.
func (e *kubeEnviron) result(r *environ.Resource, d *desired) *environ.Resource {
	state := map[string]any{"provision_id": d.data.ProvisionID, "checksum": d.checksum, "kind": string(d.t.name)}
	if d.asleep {
		state[stateHibernated] = true
	}
	return &environ.Resource{ID: r.ID, Type: r.Type, State: state, Config: d.t.config(e, d), Notice: d.notice}
}

// labels are the labels of every object of resource id.
func (e *kubeEnviron) labels(id string, t domain.ResourceType) map[string]string {
	return map[string]string{
		LabelManagedBy:    ManagedBy,
		LabelResourceID:   id,
		LabelProvisioner:  e.name,
		LabelResourceType: string(t),
	}
}

// provisionerSelector selects every object of this provisioner.
func (e *kubeEnviron) provisionerSelector() string {
	return LabelManagedBy + "=" + ManagedBy + "," + LabelProvisioner + "=" + e.name
}

// selector selects the objects of resource id.
func (e *kubeEnviron) selector(id string) string {
	return e.provisionerSelector() + "," + LabelResourceID + "=" + id
}

// withoutPrefix returns m less the keys starting with prefix.
func withoutPrefix(m map[string]string, prefix string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func merge(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func rankOf(obj *unstructured.Unstructured) int {
	info, _ := kindOf(obj.GetAPIVersion(), obj.GetKind())
	return info.rank
}
