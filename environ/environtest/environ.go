// Package environtest builds fake environs for tests out of functions, in the style of
// crossplane-runtime's ExternalClientFns: a test sets only the functions in which its environ
// differs, and every function it leaves nil does what an environ with nothing to do would.
//
// Environ implements environ.Environ and none of the optional interfaces, since a type that
// has a method always satisfies the interface that asks for it. An environ that hibernates,
// reports capacity or prepares checks is a Hibernator, CapacityReporter or CheckPreparer: each
// embeds an Environ and adds that one interface, so a test says what its environ supports by
// the type it builds.
package environtest

import (
	"context"
	"slices"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Type is what an Environ without TypeFn says its type is.
const Type = "fake"

// Environ is an environ.Environ whose methods call its functions; each method's comment says
// what it does when its function is nil.
type Environ struct {
	TypeFn          func() string
	SupportsFn      func(t domain.ResourceType) bool
	ReconcileFn     func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error)
	AwaitReadyFn    func(ctx context.Context, r *environ.Resource) error
	DeprovisionFn   func(ctx context.Context, r *environ.Resource) error
	CheckFn         func(ctx context.Context) error
	CheckResourceFn func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error)
	CloseFn         func() error
}

var _ environ.Environ = (*Environ)(nil)

// Type returns Type without TypeFn.
func (e *Environ) Type() string {
	if e.TypeFn == nil {
		return Type
	}
	return e.TypeFn()
}

// Supports reports the types of SupportedTypes supported without SupportsFn.
func (e *Environ) Supports(t domain.ResourceType) bool {
	if e.SupportsFn == nil {
		return slices.Contains(SupportedTypes, t)
	}
	return e.SupportsFn(t)
}

// Reconcile returns Unchanged(r) without ReconcileFn.
func (e *Environ) Reconcile(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if e.ReconcileFn == nil {
		return Unchanged(r), nil
	}
	return e.ReconcileFn(ctx, r, opts)
}

// AwaitReady succeeds at once without AwaitReadyFn.
func (e *Environ) AwaitReady(ctx context.Context, r *environ.Resource) error {
	if e.AwaitReadyFn == nil {
		return nil
	}
	return e.AwaitReadyFn(ctx, r)
}

// Deprovision succeeds at once without DeprovisionFn.
func (e *Environ) Deprovision(ctx context.Context, r *environ.Resource) error {
	if e.DeprovisionFn == nil {
		return nil
	}
	return e.DeprovisionFn(ctx, r)
}

// Check passes without CheckFn.
func (e *Environ) Check(ctx context.Context) error {
	if e.CheckFn == nil {
		return nil
	}
	return e.CheckFn(ctx)
}

// CheckResource finds the resource healthy, returning Unchanged(r), without CheckResourceFn.
func (e *Environ) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if e.CheckResourceFn == nil {
		return Unchanged(r), nil
	}
	return e.CheckResourceFn(ctx, r, opts)
}

// Close succeeds without CloseFn.
func (e *Environ) Close() error {
	if e.CloseFn == nil {
		return nil
	}
	return e.CloseFn()
}

// Unchanged is r as an environ returns it when it has nothing to change: its id and type,
// with the State and Config it came with.
func Unchanged(r *environ.Resource) *environ.Resource {
	return &environ.Resource{ID: r.ID, Type: r.Type, State: r.State, Config: r.Config}
}

// Hibernator is an Environ that hibernates resources (environ.Hibernator).
type Hibernator struct {
	Environ
	HibernateFn func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error)
}

var _ environ.Hibernator = (*Hibernator)(nil)

// Hibernate returns Unchanged(r) without HibernateFn.
func (e *Hibernator) Hibernate(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if e.HibernateFn == nil {
		return Unchanged(r), nil
	}
	return e.HibernateFn(ctx, r, opts)
}

// CapacityReporter is an Environ that reports its capacity (environ.CapacityReporter).
type CapacityReporter struct {
	Environ
	CapacityFn func(ctx context.Context) (environ.Capacity, error)
}

var _ environ.CapacityReporter = (*CapacityReporter)(nil)

// Capacity reports no room at all, the zero Capacity, without CapacityFn.
func (e *CapacityReporter) Capacity(ctx context.Context) (environ.Capacity, error) {
	if e.CapacityFn == nil {
		return environ.Capacity{}, nil
	}
	return e.CapacityFn(ctx)
}

// CheckPreparer is an Environ that prepares the checks of many resources at once
// (environ.CheckPreparer).
type CheckPreparer struct {
	Environ
	PrepareChecksFn func(ctx context.Context, ids []string) (environ.PreparedChecks, error)
}

var _ environ.CheckPreparer = (*CheckPreparer)(nil)

// PrepareChecks prepares nothing without PrepareChecksFn: the checks it returns are the
// environ's own CheckResource.
func (e *CheckPreparer) PrepareChecks(ctx context.Context, ids []string) (environ.PreparedChecks, error) {
	if e.PrepareChecksFn == nil {
		return &e.Environ, nil
	}
	return e.PrepareChecksFn(ctx, ids)
}

// PreparedChecksFn is an environ.PreparedChecks made of its CheckResource function.
type PreparedChecksFn func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error)

var _ environ.PreparedChecks = PreparedChecksFn(nil)

// CheckResource calls f.
func (f PreparedChecksFn) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	return f(ctx, r, opts)
}
