package domain_test

import (
	"context"
	stderrors "errors"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
)

// The domain's not-found and already-exists errors are juju/errors' kinds, and the standard
// library's errors.Is still matches them through the domain's names and wrapping.
func TestDomainErrorKindsAreJujuKinds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		kind   error
		domain error
		msg    string
	}{
		{"not found", domain.ErrNotFound, errors.NotFound, domain.ErrNotFound, "not found"},
		{"already exists", domain.ErrAlreadyExists, errors.AlreadyExists, domain.ErrAlreadyExists, "already exists"},
	} {
		wrapped := wrap(tc.err)
		if !errors.Is(wrapped, tc.kind) || !stderrors.Is(wrapped, tc.domain) || !stderrors.Is(wrapped, tc.kind) {
			t.Errorf("%s: %v is not both juju's kind and the domain's error", tc.name, wrapped)
		}
		if got := tc.domain.Error(); got != tc.msg {
			t.Errorf("%s: message %q, want %q", tc.name, got, tc.msg)
		}
	}
}

func wrap(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "resource r1: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// Bad arguments are NotValid, whether a field of args or an unknown resource type.
func TestBadArgumentsAreNotValid(t *testing.T) {
	svc := domain.NewService(newMemStore(), testTypes)
	_, err := svc.Create(context.Background(), domain.NewResource{Type: "runtime", Name: "a", Args: map[string]any{"slots": "two"}})
	var fe *domain.FieldError
	if !errors.Is(err, errors.NotValid) || !stderrors.As(err, &fe) || fe.Field != "args.slots" {
		t.Errorf("runtime args with slots %q: err = %v, want a NotValid *FieldError on args.slots", "two", err)
	}
	_, err = svc.Create(context.Background(), domain.NewResource{Type: "mysql", Name: "a"})
	if !errors.Is(err, errors.NotValid) {
		t.Errorf("create of type mysql: err = %v, want NotValid", err)
	}
	if want := `type: "mysql" is not a resource type: use one of runtime, clickhouse`; err == nil || err.Error() != want {
		t.Errorf("create of type mysql: err = %v, want %q", err, want)
	}
}

// A store that keeps no event feed cannot be watched: NotSupported, saying so.
func TestWatchWithoutFeedIsNotSupported(t *testing.T) {
	svc := domain.NewService(newMemStore(), testTypes)
	clk := testclock.NewClock(time.Now())
	err := svc.WatchResources(context.Background(), clk, domain.ListFilter{}, time.Second,
		func([]domain.Resource) error { return nil }, func(domain.ResourceChange) error { return nil })
	if !errors.Is(err, errors.NotSupported) {
		t.Errorf("watch on a store without a feed: err = %v, want NotSupported", err)
	}
}
