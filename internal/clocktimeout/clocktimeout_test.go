package clocktimeout_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/internal/clocktimeout"
	"github.com/berth-dev/berth/internal/testkit"
)

func TestPackage(t *testing.T) { gc.TestingT(t) }

type suite struct {
	clock *testclock.Clock
}

var _ = gc.Suite(&suite{})

func (s *suite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
}

func (s *suite) TestEndsAfterDurationOnClock(c *gc.C) {
	ctx, cancel := clocktimeout.WithTimeout(context.Background(), s.clock, 5*time.Second)
	defer cancel()

	c.Assert(s.clock.WaitAdvance(5*time.Second-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	c.Check(ctx.Err(), gc.IsNil)

	s.clock.Advance(time.Nanosecond)
	<-ctx.Done()
	cause := context.Cause(ctx)
	c.Check(errors.Is(cause, clocktimeout.ErrTimedOut), gc.Equals, true)
	c.Check(cause, gc.ErrorMatches, "timed out after 5s")
	c.Check(ctx.Err(), gc.Equals, context.Canceled)
}

func (s *suite) TestEndsWithParent(c *gc.C) {
	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel := clocktimeout.WithTimeout(parent, s.clock, time.Minute)
	defer cancel()

	cancelParent()
	<-ctx.Done()
	c.Check(errors.Is(context.Cause(ctx), clocktimeout.ErrTimedOut), gc.Equals, false)
	c.Check(context.Cause(ctx), gc.Equals, context.Canceled)
}

func (s *suite) TestCancelStopsTimer(c *gc.C) {
	ctx, cancel := clocktimeout.WithTimeout(context.Background(), s.clock, time.Minute)
	c.Assert(s.clock.WaitAdvance(0, testkit.LongWait, 1), gc.IsNil)

	cancel()
	<-ctx.Done()
	c.Check(context.Cause(ctx), gc.Equals, context.Canceled)
	c.Check(s.clock.WaitAdvance(time.Minute, 0, 1), gc.ErrorMatches, "(?s)got 0 timers .*")
	c.Check(context.Cause(ctx), gc.Equals, context.Canceled)
}
