package kubernetes

import (
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/runtime"
)

var _ environ.Sizer = (*kubeEnviron)(nil)

// Units implements environ.Sizer: a runtime's size is its slots, the unit of the spec's
// slot_quota; a type whose slots do not count against it (ClickHouse) is of unknown size, 0;
// another type is the size its definition's units template renders (0 without one).
func (e *kubeEnviron) Units(r *environ.Resource, opts *environ.ResourceOptions) (int64, error) {
	t, err := e.typeOf(r)
	if err != nil {
		return 0, err
	}
	var args map[string]any
	if opts != nil {
		args = opts.Args
	}
	if !t.slotQuota {
		if t.defined == nil {
			return 0, nil
		}
		return t.defined.sizeOf(args)
	}
	a, err := runtime.DecodeArgs(args)
	if err != nil {
		return 0, err
	}
	return int64(a.Slots), nil
}
