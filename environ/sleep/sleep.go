// Package sleep is a test broker whose whole work is waiting: each Reconcile sleeps for the
// spec's delay, as a broker whose calls wait on a remote system (a Kubernetes API server)
// spends its time, and provisions nothing. The bench uses it to measure what the agents
// themselves add where the database is not the limit.
//
// It is built only into binaries built with the build tag benchbroker (make bench builds
// one for the bench); the agent users run has no such provisioner type.
package sleep

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/juju/clock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/internal/specjson"
	"github.com/berth-dev/berth/environ/runtime"
)

// Type is the provisioner type of the sleep broker.
const Type = "sleep"

// Types are the resource types the sleep broker serves.
var Types = []*environ.TypeDef{runtime.Type}

// maxDelay bounds the spec's delay: far above any remote call, far below the agent's
// reconcile timeout.
const maxDelay = time.Minute

// Spec is the sleep broker's JSON spec.
type Spec struct {
	// Delay is how long each Reconcile waits, e.g. "50ms".
	Delay time.Duration
}

// ParseSpec decodes raw strictly; errors are *domain.FieldError naming the field.
func ParseSpec(raw json.RawMessage) (*Spec, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, &domain.FieldError{Field: "spec", Msg: `is missing: give {"delay": "50ms"}`}
	}
	var delay string
	if err := specjson.DecodeObject("spec", "", trimmed, []specjson.Field{{Name: "delay", Dst: &delay}}); err != nil {
		return nil, err
	}
	d, err := time.ParseDuration(delay)
	if err != nil || d < 0 || d > maxDelay {
		return nil, &domain.FieldError{Field: "delay", Msg: fmt.Sprintf("must be a duration from 0s to %s, e.g. \"50ms\"; got %q", maxDelay, delay)}
	}
	return &Spec{Delay: d}, nil
}

// New is the sleep broker's environ.Initializer.
func New(name string, raw json.RawMessage, deps environ.Deps) (environ.Environ, error) {
	spec, err := ParseSpec(raw)
	if err != nil {
		return nil, err
	}
	c := deps.Clock
	if c == nil {
		c = clock.WallClock
	}
	return &sleepEnviron{delay: spec.Delay, clock: c}, nil
}

type sleepEnviron struct {
	delay time.Duration
	clock clock.Clock
}

func (e *sleepEnviron) Type() string { return Type }

func (e *sleepEnviron) Supports(t domain.ResourceType) bool { return t == runtime.Name }

// Reconcile waits for the delay and returns the resource with a config naming nothing real.
// It keeps nothing itself (Kept false), so the agent records the wait for it to serve, as it
// does for a Kubernetes broker.
func (e *sleepEnviron) Reconcile(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.clock.After(e.delay):
	}
	return &environ.Resource{ID: r.ID, Type: r.Type, State: map[string]any{}, Config: map[string]any{"host": "sleep"}}, nil
}

// AwaitReady returns at once: the delay is the broker's whole work.
func (e *sleepEnviron) AwaitReady(ctx context.Context, r *environ.Resource) error { return nil }

// Deprovision has nothing to free.
func (e *sleepEnviron) Deprovision(ctx context.Context, r *environ.Resource) error { return nil }

// Check passes: there is nothing to check.
func (e *sleepEnviron) Check(ctx context.Context) error { return nil }

// CheckResource finds the resource as it was.
func (e *sleepEnviron) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	return &environ.Resource{ID: r.ID, Type: r.Type, State: r.State, Config: r.Config}, nil
}

func (e *sleepEnviron) Close() error { return nil }
