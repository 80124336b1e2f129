package provisioner

import "time"

// InitialConcurrency is where the limit on reconciles in flight starts by default, and the
// lowest it goes (MinConcurrency): the fixed limit of agents before it adapted, which every
// broker was measured safe at (the Kubernetes environ's client rate limit serves it
// without waiting).
const InitialConcurrency = 16

// The adaptive limit's tuning.
const (
	// limitWindow is the shortest window over which the worker's throughput is measured;
	// a window also lasts at least as many reconciles as the limit (one round of places),
	// unless most of them ended with nothing queued. On the static pool a window of 100ms
	// holds hundreds of reconciles; 250ms made a burst of 10,000 spend most of a second
	// climbing to the ceiling, and the burst 6% slower at the default settings (5,195
	// against 5,537 runtimes/s).
	limitWindow = 100 * time.Millisecond
	// limitShortWindow is the shortest window that decides without noise to fear: the
	// floor's first window of a backlog, which only sets where the climb starts from, and a
	// window after a step up that already raised throughput by limitClearGain, which no
	// noise of a busy machine makes of a step that does not pay. Each still lasts a round of
	// reconciles. At the floor a round of the static pool's takes about 5ms: a full window
	// there held about 18 rounds (297 reconciles at 2,935/s in a traced burst), while the
	// burst ran at well under half the rate it reached at 256.
	limitShortWindow = 25 * time.Millisecond
	limitClearGain   = 0.30
	// limitStep is the factor the limit grows by: a few big steps (16, 64, 256, 1,024) each
	// change throughput by more than a busy machine's noise, where many small ones would be
	// decided on noise.
	limitStep = 4
	// limitGain is how much a raised limit must raise throughput to be kept: less is noise,
	// and not worth more work in flight.
	limitGain = 0.10
	// limitHoldWindows is how many windows a limit that settled is kept before the worker
	// tries the next one again; each try in a row that does not pay doubles it, up to
	// limitHoldWindows << limitMaxMisses, so that a broker more places do not help is seldom
	// tried with more.
	limitHoldWindows = 4
	limitMaxMisses   = 6
)

// concurrencyLimit is how many reconciles the worker runs at once, its places, adapted to
// what the brokers and the database take: while a backlog keeps every place busy, the limit
// grows by limitStep as long as each step raises throughput by limitGain, and goes back to
// the limit before when a step does not, trying again after a hold that doubles with each
// try in a row that did not pay; a step that raised throughput by less than limitGain gets
// one more window before it is undone. Each step is measured after one round of reconciles
// at the new limit, so what started under the old limit is not counted, over a full window
// unless the answer is clear sooner (limitShortWindow). Once the backlog is done
// (nothing queued, nothing else in flight) or demand, not the limit, sets the pace (most
// reconciles end with nothing queued), the limit is back at its floor, so that every
// backlog starts where every broker is known to be safe: a broker whose throughput a
// client rate limit caps (Kubernetes) gains nothing from more places, and its calls then
// wait in the fair queue, where owners take turns, not at the limiter. The limit is between
// floor (InitialConcurrency, or the ceiling when lower) and ceiling (Concurrency). Only the
// loop goroutine touches it; it reads the worker's clock at each reconcile's end and sets
// no timer.
type concurrencyLimit struct {
	floor, ceiling, limit int

	start  time.Time // when the window began; zero: at the next reconcile's end
	done   int       // reconciles ended in the window
	idle   int       // of which ended with nothing queued
	settle int       // reconciles still to end before the window after a step starts

	rate    float64 // the last window's throughput, per second; 0 at the floor's first window
	from    int     // the limit before the last step
	raised  bool    // the last window was the first after a step up, or the second (doubted)
	doubted bool    // the first window after the last step up did not show it paying
	hold    int     // windows left before the next step up is tried
	misses  int     // steps up in a row that did not pay
}

func newConcurrencyLimit(floor, ceiling int) *concurrencyLimit {
	if floor == 0 {
		floor = InitialConcurrency
	}
	floor = min(floor, ceiling)
	return &concurrencyLimit{floor: floor, ceiling: ceiling, limit: floor}
}

// current is how many reconciles may be in flight now (those awaiting their resource aside).
func (l *concurrencyLimit) current() int { return l.limit }

// ended notes that a reconcile ended at now, leaving queued ids queued and inFlight
// reconciles in flight, itself included.
func (l *concurrencyLimit) ended(now time.Time, queued, inFlight int) {
	if l.floor == l.ceiling {
		return
	}
	if queued == 0 && inFlight <= 1 {
		l.reset()
		return
	}
	if l.settle > 0 {
		l.settle--
		return
	}
	if l.start.IsZero() {
		l.start, l.done, l.idle = now, 0, 0
		return
	}
	if queued == 0 && l.idle == 0 && l.done > 0 {
		// The backlog ran dry: whether demand now sets the pace is judged from here, not
		// diluted by the window's reconciles that had a backlog (a round of 256 of them
		// would take 13 s to outweigh at 20/s).
		l.start, l.done = now, 0
	}
	l.done++
	if queued == 0 {
		l.idle++
	}
	elapsed, demandBound := now.Sub(l.start), 2*l.idle > l.done
	if elapsed < limitShortWindow || (l.done < l.limit && !demandBound) {
		return
	}
	rate := float64(l.done) / elapsed.Seconds()
	if elapsed < limitWindow && (demandBound || !l.clear(rate)) {
		return
	}
	l.start, l.done, l.idle = now, 0, 0
	if demandBound {
		l.reset()
		return
	}
	l.adjust(rate)
}

// clear says whether a window that ran for less than limitWindow at rate may decide already:
// it is the floor's first, or the window after a step up whose gain is beyond doubt.
func (l *concurrencyLimit) clear(rate float64) bool {
	return l.rate == 0 || (l.raised && rate >= l.rate*(1+limitClearGain))
}

// adjust decides the next limit from a window's throughput at the current one.
func (l *concurrencyLimit) adjust(rate float64) {
	before, raised, doubted := l.rate, l.raised, l.doubted
	l.rate, l.raised, l.doubted = rate, false, false
	switch {
	case raised && rate > before && rate < before*(1+limitGain) && !doubted:
		// A step that raised throughput, but by less than pays, is judged again on the next
		// window, against the same rate before it: a burst's first few hundred milliseconds
		// run at half the rate whatever the limit, and one window of 100ms moves by a fifth
		// from the next. A step that raised nothing is undone at once.
		l.rate, l.raised, l.doubted = before, true, true
	case raised && rate < before*(1+limitGain):
		l.step(l.from) // the step did not pay: undo it, and hold
		l.hold = limitHoldWindows << l.misses
		l.misses = min(l.misses+1, limitMaxMisses)
	case raised:
		l.misses = 0
		l.raise()
	case l.hold > 0:
		l.hold--
	default:
		l.raise()
	}
}

// raise tries the next limit up, if the ceiling leaves one.
func (l *concurrencyLimit) raise() {
	if l.limit < l.ceiling {
		l.step(min(l.ceiling, l.limit*limitStep))
		l.raised = true
	}
}

// step sets the limit to n; the next window starts after a round of reconciles at n.
func (l *concurrencyLimit) step(n int) {
	l.from, l.limit = l.limit, n
	l.settle, l.start = n, time.Time{}
}

// reset puts the limit back at its floor, with nothing learnt.
func (l *concurrencyLimit) reset() {
	*l = concurrencyLimit{floor: l.floor, ceiling: l.ceiling, limit: l.floor}
}
