package kubernetes

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// fence is the claim an object was last written under, as its annotations record it: the
// resource's generation (AnnotationGeneration), and the token and holder of the lease of the
// attempt that applied it (AnnotationLeaseToken, AnnotationLeaseHolder). Zero values are
// "not recorded".
type fence struct {
	generation int64
	token      int64
	holder     string
}

// fenceOf reads the fence recorded on obj.
func fenceOf(obj metav1.Object) fence {
	ann := obj.GetAnnotations()
	var f fence
	f.generation, _ = strconv.ParseInt(ann[AnnotationGeneration], 10, 64)
	f.token, _ = strconv.ParseInt(ann[AnnotationLeaseToken], 10, 64)
	f.holder = ann[AnnotationLeaseHolder]
	return f
}

// newer returns the fence with the newer generation and the newer lease of f and g, each
// taken from whichever records the larger value.
func (f fence) newer(g fence) fence {
	if g.generation > f.generation {
		f.generation = g.generation
	}
	if g.token > f.token {
		f.token, f.holder = g.token, g.holder
	}
	return f
}

// attemptFence is the fence an attempt writes under: opts' generation and r's lease. A
// caller without a lease (a health check) carries over the newest lease live recorded, so
// that its repair keeps the fence of the attempt that applied the objects last.
func attemptFence(r *environ.Resource, opts *environ.ResourceOptions, live fence) fence {
	f := fence{generation: opts.Generation, token: live.token, holder: live.holder}
	if r.Lease != nil {
		f.token, f.holder = r.Lease.Token, r.Lease.Holder
	}
	return f
}

// annotations are the annotations that record f (those it has).
func (f fence) annotations() map[string]string {
	out := map[string]string{}
	if f.generation > 0 {
		out[AnnotationGeneration] = strconv.FormatInt(f.generation, 10)
	}
	if f.token > 0 {
		out[AnnotationLeaseToken] = strconv.FormatInt(f.token, 10)
		out[AnnotationLeaseHolder] = f.holder
	}
	return out
}

// staleWrite says why a write of an attempt of resource r under lease is refused: what of
// live (generation, lease) is newer than the attempt's. It returns nil when nothing is, and
// for a caller without a lease (a health check, which guards its generation itself).
func staleWrite(r *environ.Resource, generation int64, live fence, what string) error {
	if r.Lease == nil {
		return nil
	}
	var why string
	switch {
	case live.token > r.Lease.Token:
		why = fmt.Sprintf("it carries lease token %d of %s, newer than this attempt's %d", live.token, holderName(live.holder), r.Lease.Token)
	case generation > 0 && live.generation > generation:
		why = fmt.Sprintf("it carries generation %d, newer than this attempt's %d", live.generation, generation)
	default:
		return nil
	}
	return &StaleWriteError{
		msg:  fmt.Sprintf("%s %s: %s refused: %s", r.Type, r.ID, what, why),
		held: &domain.LeaseHeldError{Holder: live.holder},
	}
}

func holderName(holder string) string {
	if holder == "" {
		return "another holder"
	}
	return holder
}

// StaleWriteError is the refusal of a write to objects that a later claim of the resource
// (a newer lease token or generation) wrote: the attempt making it lost its lease, to the
// holder the objects name, while it paused. It wraps a *domain.LeaseHeldError, so the
// provisioner ends the attempt as it ends one whose database write was fenced: nothing more
// written, the lease not released, the resource looked at again later.
type StaleWriteError struct {
	msg  string
	held *domain.LeaseHeldError
}

func (e *StaleWriteError) Error() string { return e.msg }

// Unwrap makes errors.As(err, **domain.LeaseHeldError) and errors.Is(err,
// domain.ErrLeaseHeld) true.
func (e *StaleWriteError) Unwrap() error { return e.held }
