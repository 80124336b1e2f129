package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/environ"
)

// pollInterval is how often Deprovision looks whether the objects it deleted are gone.
const pollInterval = 500 * time.Millisecond

var metaGet = metav1.GetOptions{}

// ownedObject is a live object Berth created.
type ownedObject struct {
	kind kindInfo
	obj  metav1.Object
}

func (o ownedObject) String() string {
	return strings.ToLower(o.kind.kind) + " " + o.obj.GetName()
}

// listOwned lists the objects of every kind Berth creates that selector matches.
func (e *kubeEnviron) listOwned(ctx context.Context, cs kubernetes.Interface, selector string) ([]ownedObject, error) {
	var out []ownedObject
	for _, k := range kinds {
		objs, err := k.client(cs, e.spec.Namespace).list(ctx, selector)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", k.plural, err)
		}
		for _, o := range objs {
			out = append(out, ownedObject{kind: k, obj: o})
		}
	}
	return out, nil
}

// deleteObjects deletes objs with foreground propagation; one already gone (or going) is
// fine and not asked again. It tries every object, returns how many deletions it asked for,
// and the failures together. For a resource r deleted under a lease (nil for the orphan
// sweep), an object that carries a newer lease is refused (StaleWriteError), and each
// deletion is conditional on the object as listed: one changed since is left to the
// caller's next round.
func (e *kubeEnviron) deleteObjects(ctx context.Context, cs kubernetes.Interface, objs []ownedObject, r *environ.Resource) (int, error) {
	var failed []string
	asked := 0
	for _, o := range objs {
		if o.obj.GetDeletionTimestamp() != nil {
			continue
		}
		version := ""
		if r != nil {
			if err := staleWrite(r, 0, fenceOf(o.obj), "delete of "+o.String()); err != nil {
				return asked, e.refused(err)
			}
			version = o.obj.GetResourceVersion()
		}
		asked++
		err := o.kind.client(cs, e.spec.Namespace).del(ctx, o.obj.GetName(), version)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			failed = append(failed, fmt.Sprintf("delete %s: %v", o, err))
		}
	}
	if len(failed) > 0 {
		return asked, fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return asked, nil
}

func describeOwned(objs []ownedObject) string {
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.String()
	}
	return strings.Join(names, ", ")
}
