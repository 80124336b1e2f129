package sleep_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/sleep"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		delay time.Duration
		field string // the field a refusal names; "" when accepted
	}{
		{`{"delay": "50ms"}`, 50 * time.Millisecond, ""},
		{`{"delay": "0s"}`, 0, ""},
		{`{}`, 0, "delay"},
		{`{"delay": "-1s"}`, 0, "delay"},
		{`{"delay": "2m"}`, 0, "delay"},
		{`{"delay": 50}`, 0, "delay"},
		{`{"delay": "50ms", "jitter": "1ms"}`, 0, "jitter"},
		{``, 0, "spec"},
	} {
		spec, err := sleep.ParseSpec(json.RawMessage(tc.spec))
		var fe *domain.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("ParseSpec(%s): %v", tc.spec, err)
		case tc.field == "" && spec.Delay != tc.delay:
			t.Errorf("ParseSpec(%s).Delay = %s, want %s", tc.spec, spec.Delay, tc.delay)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("ParseSpec(%s) = %v; want a field error naming %q", tc.spec, err, tc.field)
		}
	}
}

func TestReconcileWaitsForTheDelay(t *testing.T) {
	fake := testclock.NewClock(time.Now())
	env, err := sleep.New("wait", json.RawMessage(`{"delay": "50ms"}`), environ.Deps{Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := env.Reconcile(context.Background(), &environ.Resource{ID: "r1", Type: domain.ResourceTypeRuntime}, &environ.ResourceOptions{})
		done <- err
	}()
	if err := fake.WaitAdvance(49*time.Millisecond, time.Second, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Reconcile returned (%v) before its delay", err)
	default:
	}
	fake.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}

func TestReconcileEndsWithItsContext(t *testing.T) {
	env, err := sleep.New("wait", json.RawMessage(`{"delay": "1m"}`), environ.Deps{Clock: testclock.NewClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := env.Reconcile(ctx, &environ.Resource{ID: "r1", Type: domain.ResourceTypeRuntime}, &environ.ResourceOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reconcile with an ended context = %v, want context.Canceled", err)
	}
}
