package static

import (
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/runtime"
)

var _ environ.Sizer = (*staticEnviron)(nil)

// Units implements environ.Sizer: a runtime's size is its slots.
func (e *staticEnviron) Units(_ *environ.Resource, opts *environ.ResourceOptions) (int64, error) {
	var args map[string]any
	if opts != nil {
		args = opts.Args
	}
	a, err := runtime.DecodeArgs(args)
	if err != nil {
		return 0, err
	}
	return int64(a.Slots), nil
}
