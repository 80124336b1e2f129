package testkit_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/testkit"
)

// recorder is a Fataler that records the failure instead of ending the test.
type recorder struct{ failure string }

func (r *recorder) Fatalf(format string, args ...any) { r.failure = fmt.Sprintf(format, args...) }

func TestEventuallyReturnsOnceConditionHolds(t *testing.T) {
	var r recorder
	calls := 0
	testkit.Eventually(&r, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if r.failure != "" || calls != 3 {
		t.Fatalf("failure %q after %d calls, want none after 3", r.failure, calls)
	}
}

func TestWithinFailsWithLastError(t *testing.T) {
	var r recorder
	calls := 0
	testkit.Within(&r, 5*time.Millisecond, func() error {
		calls++
		return fmt.Errorf("have %d", calls)
	})
	want := fmt.Sprintf("have %d (still so after %d tries over 5ms)", calls, calls)
	if r.failure != want {
		t.Fatalf("failure %q, want %q", r.failure, want)
	}
	if calls > 5 {
		t.Fatalf("%d tries, want at most 5", calls)
	}
}

func TestHolds(t *testing.T) {
	if err := testkit.Holds("the door", func() bool { return true })(); err != nil {
		t.Fatalf("Holds of a true predicate: %v", err)
	}
	err := testkit.Holds("the door", func() bool { return false })()
	if err == nil || err.Error() != "timed out waiting for the door" {
		t.Fatalf("Holds of a false predicate: %v", err)
	}
}
