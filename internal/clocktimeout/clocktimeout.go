// Package clocktimeout gives a context a deadline on an injected clock, so that a worker's
// timeouts run on the clock its tests drive instead of on the wall clock that
// context.WithTimeout reads.
package clocktimeout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/juju/clock"
)

// ErrTimedOut is the cause of a context that WithTimeout's timer ended, so that a caller can
// tell a timeout from a cancellation of the parent with errors.Is(context.Cause(ctx), ...).
var ErrTimedOut = errors.New("timed out")

// WithTimeout returns a context that ends with parent, or after d on clk with a cause that
// wraps ErrTimedOut and says d. The cancel function stops the timer; call it when done.
func WithTimeout(parent context.Context, clk clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	timer := clk.AfterFunc(d, func() {
		cancel(fmt.Errorf("%w after %s", ErrTimedOut, d))
	})
	return ctx, func() {
		timer.Stop()
		cancel(context.Canceled)
	}
}
