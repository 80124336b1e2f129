package provisioner

import (
	"math"
	"testing"
	"time"
)

// drive ends reconciles on l for d of virtual time from at, each after the last at the
// throughput rate gives for the limit of the moment, every place busy, with ids queued
// (a backlog) or none, and returns the time reached and how long the limit spent at each
// value.
func drive(l *concurrencyLimit, at time.Time, d time.Duration, rate func(limit int) float64, backlog bool) (time.Time, map[int]time.Duration) {
	spent := map[int]time.Duration{}
	end := at.Add(d)
	for at.Before(end) {
		limit := l.current()
		step := time.Duration(float64(time.Second) / rate(limit))
		at = at.Add(step)
		spent[limit] += step
		queued := 0
		if backlog {
			queued = limit
		}
		l.ended(at, queued, limit)
	}
	return at, spent
}

// The static pool's throughput by concurrency, as the bench measured it (1,285/s at 16,
// 2,017/s at 64, 2,801/s at 256): about 1.2x per doubling.
func databaseRate(limit int) float64 { return 1285 * math.Pow(float64(limit)/16, 0.28) }

// While a backlog keeps every place busy and each step up pays, the limit climbs from the
// floor to the ceiling within a second and stays there.
func TestLimitClimbsWhileThroughputRises(t *testing.T) {
	l := newConcurrencyLimit(InitialConcurrency, 256)
	if l.current() != InitialConcurrency {
		t.Fatalf("the limit starts at %d, want %d", l.current(), InitialConcurrency)
	}
	_, spent := drive(l, time.Unix(0, 0), 30*time.Second, databaseRate, true)
	t.Logf("time at each limit: %v", spent)
	if spent[256] < 29*time.Second {
		t.Errorf("over 30s of a backlog the limit spent %s at the ceiling (%v), want all but the first second", spent[256], spent)
	}
}

// Where each step up raises throughput by far more than noise could (the static pool's
// first steps: +47% each here), the climb does not wait out full windows: the floor's first
// window and each window after a step that clearly paid end after a round of reconciles and
// limitShortWindow.
func TestLimitClimbsWithoutFullWindowsWhereEachStepClearlyPays(t *testing.T) {
	l := newConcurrencyLimit(InitialConcurrency, 256)
	start := time.Unix(0, 0)
	at := start
	for l.current() < 256 && at.Sub(start) < time.Second {
		at, _ = drive(l, at, time.Millisecond, databaseRate, true)
	}
	if took := at.Sub(start); l.current() != 256 || took >= 2*limitWindow {
		t.Errorf("the limit is %d after %s of a backlog, want 256 in less than two full windows (%s)", l.current(), took, 2*limitWindow)
	}
}

// A broker whose throughput a rate limit caps gains nothing from more places: the limit
// tries one step up now and then, undoes it, and spends most of its time at the floor.
func TestLimitHoldsWhereThroughputDoesNot(t *testing.T) {
	capped := func(limit int) float64 { return math.Min(float64(limit), 16) } // 1s a reconcile, 16/s at most
	l := newConcurrencyLimit(InitialConcurrency, 256)
	_, spent := drive(l, time.Unix(0, 0), 10*time.Minute, capped, true)
	t.Logf("time at each limit: %v", spent)
	for limit := range spent {
		if limit > limitStep*InitialConcurrency {
			t.Errorf("the limit reached %d (%v); want at most one step above the floor", limit, spent)
		}
	}
	if spent[InitialConcurrency] < 8*time.Minute {
		t.Errorf("the limit spent %s of 10 minutes at the floor (%v), want most of it", spent[InitialConcurrency], spent)
	}
	if l.current() > limitStep*InitialConcurrency {
		t.Errorf("the limit ends at %d, want at most %d", l.current(), limitStep*InitialConcurrency)
	}
}

// slowStart is databaseRate but for the first 200 ends at 64, the step's settling round (64)
// and its first window (100ms, about 135 ends at that rate): they run at 1.05 times the rate
// at 16, as a burst's first few hundred milliseconds do whatever the limit; after them 64
// pays as usual.
func slowStart() func(limit int) float64 {
	atStep := 0
	return func(limit int) float64 {
		if limit == 64 && atStep < 200 {
			atStep++
			return 1.05 * databaseRate(16)
		}
		return databaseRate(limit)
	}
}

// A step up whose first window raised throughput, but by less than pays, is judged again on
// its next window: one that pays there is kept, and the climb goes on.
func TestLimitJudgesAStepThatBarelyPaidOnOneMoreWindow(t *testing.T) {
	l := newConcurrencyLimit(InitialConcurrency, 256)
	_, spent := drive(l, time.Unix(0, 0), 10*time.Second, slowStart(), true)
	t.Logf("time at each limit: %v", spent)
	if spent[256] < 9*time.Second || spent[InitialConcurrency] > 100*time.Millisecond {
		t.Errorf("the limit spent %s at the ceiling and %s at the floor (%v), want all but the first second at the ceiling and no second try", spent[256], spent[InitialConcurrency], spent)
	}
}

// A step that raises throughput in both its windows, but by less than pays, is undone after
// the second, and tried again later, less often each time.
func TestLimitUndoesAStepThatBarelyPaysInTwoWindows(t *testing.T) {
	barely := func(limit int) float64 { return 1000 * math.Pow(1.05, math.Log2(float64(limit)/16)/2) } // +5% a step
	l := newConcurrencyLimit(InitialConcurrency, 256)
	_, spent := drive(l, time.Unix(0, 0), time.Minute, barely, true)
	t.Logf("time at each limit: %v", spent)
	if spent[InitialConcurrency] < 45*time.Second || spent[256] > 0 {
		t.Errorf("the limit spent %s of a minute at the floor (%v), want most of it and none at 256", spent[InitialConcurrency], spent)
	}
}

// Where the work waits (a broker sleeping 50ms) and the database takes 2,000/s, the limit
// climbs while throughput follows it and stops where the database does.
func TestLimitStopsWhereTheDatabaseDoes(t *testing.T) {
	waiting := func(limit int) float64 { return math.Min(float64(limit)/0.05, 2000) }
	l := newConcurrencyLimit(InitialConcurrency, 1024)
	_, spent := drive(l, time.Unix(0, 0), time.Minute, waiting, true)
	t.Logf("time at each limit: %v", spent)
	best := 0
	for limit, d := range spent {
		if d > spent[best] {
			best = limit
		}
	}
	if best != 256 {
		t.Errorf("the limit spent most of its time at %d (%v), want 256 (the step past the database's 2,000/s at 100)", best, spent)
	}
	if spent[1024] > 10*time.Second {
		t.Errorf("the limit went on past what paid: %v", spent)
	}
}

// Once demand, not the limit, sets the pace, the limit goes back to its floor: the next
// backlog starts there.
func TestLimitReturnsToTheFloorWithoutABacklog(t *testing.T) {
	l := newConcurrencyLimit(InitialConcurrency, 256)
	at, _ := drive(l, time.Unix(0, 0), 5*time.Second, databaseRate, true)
	if l.current() != 256 {
		t.Fatalf("the limit is %d after a backlog, want 256", l.current())
	}
	drive(l, at, 2*time.Second, func(int) float64 { return 20 }, false)
	if l.current() != InitialConcurrency {
		t.Errorf("the limit is %d once nothing is queued, want the floor %d", l.current(), InitialConcurrency)
	}
}

// The backlog's last reconcile puts the limit back at its floor at once.
func TestLimitReturnsToTheFloorWhenTheBacklogIsDone(t *testing.T) {
	l := newConcurrencyLimit(InitialConcurrency, 256)
	at, _ := drive(l, time.Unix(0, 0), 5*time.Second, databaseRate, true)
	if l.current() != 256 {
		t.Fatalf("the limit is %d after a backlog, want 256", l.current())
	}
	l.ended(at.Add(time.Millisecond), 0, 2)
	if l.current() != 256 {
		t.Errorf("the limit is %d with a reconcile still in flight, want 256 until the backlog is done", l.current())
	}
	l.ended(at.Add(2*time.Millisecond), 0, 1)
	if l.current() != InitialConcurrency {
		t.Errorf("the limit is %d once the backlog is done, want the floor %d", l.current(), InitialConcurrency)
	}
}

// A ceiling at or below the floor is the limit, fixed: --concurrency 16 or less by default,
// or --min-concurrency raised to the ceiling.
func TestLimitAtOrBelowTheFloorIsFixed(t *testing.T) {
	for _, fl := range []struct{ floor, ceiling int }{{InitialConcurrency, 1}, {InitialConcurrency, 8}, {InitialConcurrency, InitialConcurrency}, {256, 256}, {512, 256}} {
		ceiling := fl.ceiling
		l := newConcurrencyLimit(fl.floor, ceiling)
		_, spent := drive(l, time.Unix(0, 0), 10*time.Second, databaseRate, true)
		if l.current() != ceiling || len(spent) != 1 {
			t.Errorf("ceiling %d: the limit took %v, want %d throughout", ceiling, spent, ceiling)
		}
	}
}
