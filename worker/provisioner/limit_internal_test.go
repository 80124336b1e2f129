package provisioner

import (
	"math"
	"testing"
	"time"
)

// drive ends reconciles on l for d of virtual time from at, each after the last at the
// throughput rate gives for the limit of the moment, with ids queued or not, and returns the
// time reached and how long the limit spent at each value.
func drive(l *concurrencyLimit, at time.Time, d time.Duration, rate func(limit int) float64, queued bool) (time.Time, map[int]time.Duration) {
	spent := map[int]time.Duration{}
	end := at.Add(d)
	for at.Before(end) {
		limit := l.current()
		step := time.Duration(float64(time.Second) / rate(limit))
		at = at.Add(step)
		spent[limit] += step
		l.ended(at, queued)
	}
	return at, spent
}

// The static pool's throughput by concurrency, as the bench measured it (1,285/s at 16,
// 2,017/s at 64, 2,801/s at 256): about 1.2x per doubling.
func databaseRate(limit int) float64 { return 1285 * math.Pow(float64(limit)/16, 0.28) }

// While a backlog keeps every place busy and each doubling pays, the limit climbs from the
// floor to the ceiling within seconds and stays there, trying half now and then.
func TestLimitClimbsWhileThroughputRises(t *testing.T) {
	l := newConcurrencyLimit(256)
	if l.current() != InitialConcurrency {
		t.Fatalf("the limit starts at %d, want %d", l.current(), InitialConcurrency)
	}
	at, spent := drive(l, time.Unix(0, 0), 2*time.Second, databaseRate, true)
	if spent[256] == 0 {
		t.Fatalf("after 2s of a backlog the limit never reached the ceiling 256: %v", spent)
	}
	_, spent = drive(l, at, 30*time.Second, databaseRate, true)
	t.Logf("time at each limit: %v", spent)
	if spent[256] < 25*time.Second {
		t.Errorf("over 30s of a backlog the limit spent %s at the ceiling (%v), want most of it", spent[256], spent)
	}
}

// A broker whose throughput a rate limit caps gains nothing from more places: the limit
// tries one doubling now and then, undoes it, and spends most of its time at the floor.
func TestLimitHoldsWhereThroughputDoesNot(t *testing.T) {
	capped := func(limit int) float64 { return math.Min(float64(limit), 16) } // 1s a reconcile, 16/s at most
	l := newConcurrencyLimit(256)
	_, spent := drive(l, time.Unix(0, 0), 10*time.Minute, capped, true)
	t.Logf("time at each limit: %v", spent)
	for limit := range spent {
		if limit > 2*InitialConcurrency {
			t.Errorf("the limit reached %d (%v); want at most one doubling of the floor", limit, spent)
		}
	}
	if spent[InitialConcurrency] < 7*time.Minute {
		t.Errorf("the limit spent %s of 10 minutes at the floor (%v), want most of it", spent[InitialConcurrency], spent)
	}
	if l.current() > 2*InitialConcurrency {
		t.Errorf("the limit ends at %d, want at most %d", l.current(), 2*InitialConcurrency)
	}
}

// Where the work waits (a broker sleeping 50ms) and the database takes 2,000/s, the limit
// climbs while throughput follows it and stops where the database does.
func TestLimitStopsWhereTheDatabaseDoes(t *testing.T) {
	waiting := func(limit int) float64 { return math.Min(float64(limit)/0.05, 2000) }
	l := newConcurrencyLimit(1024)
	_, spent := drive(l, time.Unix(0, 0), time.Minute, waiting, true)
	t.Logf("time at each limit: %v", spent)
	best := 0
	for limit, d := range spent {
		if d > spent[best] {
			best = limit
		}
	}
	if best != 64 && best != 128 {
		t.Errorf("the limit spent most of its time at %d (%v), want 64 or 128 (the database's 2,000/s at 100)", best, spent)
	}
	if spent[1024] > 0 || spent[512] > 0 {
		t.Errorf("the limit went on past what paid: %v", spent)
	}
}

// Once demand, not the limit, sets the pace, the limit goes back to its floor: the next
// backlog starts there.
func TestLimitReturnsToTheFloorWithoutABacklog(t *testing.T) {
	l := newConcurrencyLimit(256)
	at, _ := drive(l, time.Unix(0, 0), 5*time.Second, databaseRate, true)
	if l.current() != 256 {
		t.Fatalf("the limit is %d after a backlog, want 256", l.current())
	}
	drive(l, at, 2*time.Second, func(int) float64 { return 20 }, false)
	if l.current() != InitialConcurrency {
		t.Errorf("the limit is %d once nothing is queued, want the floor %d", l.current(), InitialConcurrency)
	}
}

// A ceiling at or below InitialConcurrency is the limit, fixed.
func TestLimitAtOrBelowTheFloorIsFixed(t *testing.T) {
	for _, ceiling := range []int{1, 8, InitialConcurrency} {
		l := newConcurrencyLimit(ceiling)
		_, spent := drive(l, time.Unix(0, 0), 10*time.Second, databaseRate, true)
		if l.current() != ceiling || len(spent) != 1 {
			t.Errorf("ceiling %d: the limit took %v, want %d throughout", ceiling, spent, ceiling)
		}
	}
}
