package provisioner

import (
	"time"

	gc "gopkg.in/check.v1"
)

type backoffSuite struct{}

var _ = gc.Suite(&backoffSuite{})

func (*backoffSuite) TestBounds(c *gc.C) {
	const base, max = 10 * time.Second, 5 * time.Minute
	for _, t := range []struct {
		attempts int
		rand     float64
		want     time.Duration
	}{
		// rand 0: never below the floor of base/2.
		{1, 0, 5 * time.Second},
		{4, 0, 5 * time.Second},
		{40, 0, 5 * time.Second},
		// rand 0.999: just under the ceiling min(max, base * 2^(attempts-1)).
		{1, 0.999, 9990 * time.Millisecond},
		{2, 0.999, 19980 * time.Millisecond},
		{5, 0.999, 159840 * time.Millisecond},
		{6, 0.999, 299700 * time.Millisecond}, // 320s capped at 300s
		{1000, 0.999, 299700 * time.Millisecond},
		// In between, the draw scales the ceiling.
		{3, 0.5, 20 * time.Second},
		{1, 0.25, 5 * time.Second}, // 2.5s, lifted to the floor
	} {
		c.Check(backoff(base, max, t.attempts, t.rand), gc.Equals, t.want,
			gc.Commentf("attempts %d, rand %v", t.attempts, t.rand))
	}
}

func (*backoffSuite) TestWithinRangeForEveryAttempt(c *gc.C) {
	const base, max = time.Second, time.Hour
	for attempts := 1; attempts <= 70; attempts++ {
		for _, r := range []float64{0, 0.3, 0.999} {
			d := backoff(base, max, attempts, r)
			c.Check(d >= base/2, gc.Equals, true, gc.Commentf("attempts %d: %s", attempts, d))
			c.Check(d < max, gc.Equals, true, gc.Commentf("attempts %d: %s", attempts, d))
		}
	}
}
