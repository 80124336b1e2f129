package provisioner

import "time"

// InitialConcurrency is where the limit on reconciles in flight starts, and the lowest it
// goes: the fixed limit of agents before it adapted, which every broker was measured safe
// at (the Kubernetes environ's client rate limit serves it without waiting).
const InitialConcurrency = 16

// The adaptive limit's tuning.
const (
	// limitWindow is the shortest window over which the worker's throughput is measured;
	// a window also lasts at least as many reconciles as the limit (one round of places),
	// unless most of them ended with nothing queued.
	limitWindow = 250 * time.Millisecond
	// limitGain is how much a doubled limit must raise throughput to be kept (and how much
	// a halved one must lower it to be undone): less is noise, and not worth more work in
	// flight.
	limitGain = 0.05
	// limitHoldWindows is how many windows a limit that settled is kept before the worker
	// tries the next one again; each try in a row that does not pay doubles it, up to
	// limitHoldWindows << limitMaxMisses, so that a broker more places do not help is seldom
	// tried with more.
	limitHoldWindows = 4
	limitMaxMisses   = 4
)

// concurrencyLimit is how many reconciles the worker runs at once, its places, adapted to
// what the brokers and the database take: while a backlog keeps every place busy, the limit
// doubles as long as each doubling raises throughput by limitGain, and goes back to the
// limit before when it does not; at the ceiling it tries half, and keeps half when that
// costs no throughput. Each change is measured after one round of reconciles at the new
// limit, so what started under the old limit is not counted. When demand, not the limit,
// sets the pace (most reconciles end with nothing queued), the limit goes back to its
// floor, so that every backlog starts where every broker is known to be safe: a broker
// whose throughput a client rate limit caps (Kubernetes) gains nothing from more places,
// and its calls then queue in the fair queue, where owners take turns, not at the limiter.
// The limit is between floor (InitialConcurrency, or the ceiling when lower) and ceiling
// (Concurrency). Only the loop goroutine touches it; it reads the worker's clock at each
// reconcile's end and sets no timer.
type concurrencyLimit struct {
	floor, ceiling, limit int

	start  time.Time // when the window began; zero: at the next reconcile's end
	done   int       // reconciles ended in the window
	idle   int       // of which ended with nothing queued
	settle int       // reconciles still to end before the window after a change starts

	rate   float64 // the last window's throughput, per second; 0 after a quiet spell
	from   int     // the limit before the last change
	step   int     // the last change: +1 doubled, -1 halved, 0 none or undone
	hold   int     // windows left before the next change is tried
	misses int     // tries in a row that did not pay
}

func newConcurrencyLimit(ceiling int) *concurrencyLimit {
	floor := min(InitialConcurrency, ceiling)
	return &concurrencyLimit{floor: floor, ceiling: ceiling, limit: floor}
}

// current is how many reconciles may be in flight now (those awaiting their resource aside).
func (l *concurrencyLimit) current() int { return l.limit }

// ended notes that a reconcile ended at now, with ids still queued or none.
func (l *concurrencyLimit) ended(now time.Time, queued bool) {
	if l.floor == l.ceiling {
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
	l.done++
	if !queued {
		l.idle++
	}
	elapsed, demandBound := now.Sub(l.start), 2*l.idle > l.done
	if elapsed < limitWindow || (l.done < l.limit && !demandBound) {
		return
	}
	rate := float64(l.done) / elapsed.Seconds()
	l.start, l.done, l.idle = now, 0, 0
	if demandBound {
		l.change(l.floor, 0)
		l.rate, l.hold, l.misses = 0, 0, 0
		return
	}
	l.adjust(rate)
}

// adjust decides the next limit from a window's throughput at the current one.
func (l *concurrencyLimit) adjust(rate float64) {
	before := l.rate
	l.rate = rate
	switch {
	case l.step > 0 && rate < before*(1+limitGain), l.step < 0 && rate <= before*(1-limitGain):
		l.change(l.from, 0) // the change did not pay: undo it, and hold
		l.hold = limitHoldWindows << l.misses
		l.misses = min(l.misses+1, limitMaxMisses)
	case l.step > 0:
		l.misses = 0
		l.change(l.limit*2, +1)
	case l.step < 0:
		l.misses = 0
		l.change(l.limit/2, -1)
	case l.hold > 0:
		l.hold--
	case l.limit < l.ceiling:
		l.change(l.limit*2, +1)
	case l.limit > l.floor:
		l.change(l.limit/2, -1)
	}
}

// change sets the limit to n, within the floor and the ceiling, having moved in direction
// step; the next window starts after a round of reconciles at the new limit. A change the
// bounds leave nothing of is none, and the limit holds.
func (l *concurrencyLimit) change(n, step int) {
	n = max(l.floor, min(l.ceiling, n))
	if n == l.limit {
		l.step = 0
		if step != 0 {
			l.hold = limitHoldWindows
		}
		return
	}
	l.from, l.limit, l.step = l.limit, n, step
	l.settle, l.start = n, time.Time{}
}
