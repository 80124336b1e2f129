package environtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
)

// An Environ without functions is an environ with nothing to do, and it has none of the
// optional interfaces the workers look for.
func TestDefaults(t *testing.T) {
	ctx := context.Background()
	r := &environ.Resource{ID: "r1", Type: domain.ResourceTypeRuntime, State: map[string]any{"host": "a"}, Config: map[string]any{"url": "x"}}
	var env environ.Environ = &environtest.Environ{}
	if env.Type() != environtest.Type || !env.Supports(domain.ResourceTypeClickHouse) || env.Supports("nope") {
		t.Errorf("Type, Supports = %q, %v, %v; want %q and every domain type", env.Type(), env.Supports(domain.ResourceTypeClickHouse), env.Supports("nope"), environtest.Type)
	}
	got, err := env.Reconcile(ctx, r, &environ.ResourceOptions{})
	if err != nil || got.ID != "r1" || got.State["host"] != "a" || got.Config["url"] != "x" {
		t.Errorf("Reconcile = %+v, %v; want r1 unchanged", got, err)
	}
	if got, err := env.CheckResource(ctx, r, &environ.ResourceOptions{}); err != nil || got.State["host"] != "a" {
		t.Errorf("CheckResource = %+v, %v; want r1 unchanged", got, err)
	}
	if err := errors.Join(env.AwaitReady(ctx, r), env.Deprovision(ctx, r), env.Check(ctx), env.Close()); err != nil {
		t.Errorf("AwaitReady, Deprovision, Check, Close: %v", err)
	}
	if _, ok := env.(environ.Hibernator); ok {
		t.Errorf("Environ is a Hibernator")
	}
	if _, ok := env.(environ.CapacityReporter); ok {
		t.Errorf("Environ is a CapacityReporter")
	}
	if _, ok := env.(environ.CheckPreparer); ok {
		t.Errorf("Environ is a CheckPreparer")
	}
}

func TestFunctionsAreCalled(t *testing.T) {
	boom := errors.New("boom")
	env := &environtest.Hibernator{
		Environ: environtest.Environ{DeprovisionFn: func(context.Context, *environ.Resource) error { return boom }},
		HibernateFn: func(context.Context, *environ.Resource, *environ.ResourceOptions) (*environ.Resource, error) {
			return nil, boom
		},
	}
	if err := env.Deprovision(context.Background(), &environ.Resource{}); err != boom {
		t.Errorf("Deprovision = %v, want DeprovisionFn's error", err)
	}
	if _, err := env.Hibernate(context.Background(), &environ.Resource{}, nil); err != boom {
		t.Errorf("Hibernate = %v, want HibernateFn's error", err)
	}
}

// Open hands a call through only to a call that waits; Release lets the next call through
// whenever it comes.
func TestGate(t *testing.T) {
	gate := environtest.NewGate()
	gate.Release()
	if err := gate.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after Release = %v", err)
	}
	done := make(chan error)
	go func() { done <- gate.Wait(context.Background()) }()
	gate.Open(t)
	if err := <-done; err != nil {
		t.Fatalf("Wait, opened = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := gate.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait, cancelled = %v, want context.Canceled", err)
	}
}

func TestCalls(t *testing.T) {
	calls := environtest.NewCalls[string]()
	if _, ok := calls.TryNext(); ok {
		t.Fatalf("TryNext found a call in an empty log")
	}
	calls.Add("a")
	calls.Add("b")
	if got := calls.Next(t); got != "a" {
		t.Errorf("Next = %q, want a", got)
	}
	if got, ok := calls.TryNext(); !ok || got != "b" {
		t.Errorf("TryNext = %q, %v; want b", got, ok)
	}
	calls.None(t, 0)
}
