package statetest

import (
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
)

func mustDraw(t *testing.T, st domain.BudgetStore, draw domain.BudgetDraw) domain.BudgetGrant {
	t.Helper()
	g, err := st.DrawBudget(testContext(t), draw)
	if err != nil {
		t.Fatalf("draw %+v: %v", draw, err)
	}
	return g
}

// shiftBudget moves the provisioner's bucket's last refill by d on the database clock (into
// the past for a negative d), as if that much more (or less) time had passed since.
func shiftBudget(t *testing.T, b *Backend, provisioner string, d time.Duration) {
	t.Helper()
	query := `UPDATE broker_budgets SET refreshed_at = refreshed_at + make_interval(secs => $2) WHERE provisioner = $1`
	if b.Dialect == SQLite {
		query = `UPDATE broker_budgets SET refreshed_at = strftime('%Y-%m-%dT%H:%M:%fZ', refreshed_at, printf('%+.3f seconds', $2)) WHERE provisioner = $1`
	}
	if n, err := b.Exec(testContext(t), query, provisioner, d.Seconds()); err != nil || n != 1 {
		t.Fatalf("shift the budget of %s by %v: %d rows, %v", provisioner, d, n, err)
	}
}

// A bucket starts full, refills by the time passed on the database clock up to its burst,
// grants whole tokens only (never more than asked), and follows the rate and burst of
// each draw.
func testBudgetRefillsByTheDatabaseClock(t *testing.T, b *Backend) {
	draw := domain.BudgetDraw{Provisioner: "k8s", Rate: 0.5, Burst: 4, Want: 10}
	if g := mustDraw(t, b, draw); g.Granted != 4 || g.Left != 0 {
		t.Fatalf("first draw of 10 from a new bucket of burst 4: %+v; want 4 granted, none left", g)
	}
	if g := mustDraw(t, b, draw); g.Granted != 0 || g.Left >= 1 {
		t.Fatalf("draw from an emptied bucket at 0.5/s: %+v; want none granted, less than one left", g)
	}
	shiftBudget(t, b, "k8s", -4*time.Second)
	g := mustDraw(t, b, draw)
	if g.Granted != 2 || g.Left < 0 || g.Left >= 1 {
		t.Fatalf("draw 4s later at 0.5/s: %+v; want 2 granted, less than one left", g)
	}
	shiftBudget(t, b, "k8s", -time.Hour)
	if g := mustDraw(t, b, domain.BudgetDraw{Provisioner: "k8s", Rate: 0.5, Burst: 4, Want: 1}); g.Granted != 1 || g.Left != 3 {
		t.Fatalf("draw of 1 an hour later: %+v; want 1 granted and the burst of 4 less 1 left", g)
	}
	if g := mustDraw(t, b.Reopen(t), domain.BudgetDraw{Provisioner: "k8s", Rate: 0.5, Burst: 2, Want: 5}); g.Granted != 2 || g.Left != 0 {
		t.Fatalf("draw of 5 with the burst lowered to 2 from a bucket of 3: %+v; want 2 granted (the new burst), none left", g)
	}
	// A draw whose clock is behind the last refill's (its transaction began first) refills
	// nothing and leaves the later refill time, so no time is counted twice.
	shiftBudget(t, b, "k8s", time.Hour)
	if g := mustDraw(t, b, draw); g.Granted != 0 || g.Left != 0 {
		t.Fatalf("draw before the last refill: %+v; want nothing refilled", g)
	}
	if g := mustDraw(t, b, domain.BudgetDraw{Provisioner: "other", Rate: 100, Burst: 1, Want: 3}); g.Granted != 1 {
		t.Fatalf("first draw of another provisioner: %+v; want its own full bucket of 1", g)
	}
}

// Draws that cannot be served say which field is wrong, and create no bucket.
func testBudgetDrawsAreChecked(t *testing.T, b *Backend) {
	for _, tc := range []struct {
		draw  domain.BudgetDraw
		field string
	}{
		{domain.BudgetDraw{Rate: 1, Burst: 1, Want: 1}, "provisioner"},
		{domain.BudgetDraw{Provisioner: "p", Rate: 0, Burst: 1, Want: 1}, "rate"},
		{domain.BudgetDraw{Provisioner: "p", Rate: -2, Burst: 1, Want: 1}, "rate"},
		{domain.BudgetDraw{Provisioner: "p", Rate: 1, Burst: 0, Want: 1}, "burst"},
		{domain.BudgetDraw{Provisioner: "p", Rate: 1, Burst: 1, Want: 0}, "want"},
	} {
		_, err := b.DrawBudget(testContext(t), tc.draw)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, jujuerrors.NotValid) {
			t.Errorf("draw %+v: %v; want a not-valid error naming %s", tc.draw, err, tc.field)
		}
	}
	var n int
	if err := b.QueryRow(testContext(t), `SELECT count(*) FROM broker_budgets`).Scan(&n); err != nil || n != 0 {
		t.Errorf("buckets after refused draws: %d (%v); want none", n, err)
	}
}

// budgetGrant is one draw of the concurrent test: what it got, between when it was sent
// and when its answer came.
type budgetGrant struct {
	sent, answered time.Time
	granted        int
}

// Agents on two stores drawing from one bucket at once are never granted more than the
// burst plus the rate times the time between any two moments: the bound holds for every
// window of the run, not only for the whole of it.
func testBudgetNeverGrantsMoreThanBurstPlusRate(t *testing.T, b *Backend) {
	const (
		rate    = 200.0
		burst   = 20
		want    = 3
		drawers = 6
		run     = 1500 * time.Millisecond
	)
	ctx := testContext(t)
	stores := []domain.BudgetStore{b, b.Reopen(t)}
	var (
		mu     sync.Mutex
		grants []budgetGrant
		wg     sync.WaitGroup
		failed error
	)
	// The store refills on the wall clock, so the test times draws on it too (Round(0) drops
	// the monotonic reading Sub would otherwise use): the two may drift apart while the wall
	// clock is slewed, and a window measured on the monotonic clock could then be shorter
	// than the store's by a fraction of a millisecond.
	wall := func() time.Time { return time.Now().Round(0) }
	start := wall()
	for i := range drawers {
		st := stores[i%len(stores)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wall().Sub(start) < run {
				sent := wall()
				g, err := st.DrawBudget(ctx, domain.BudgetDraw{Provisioner: "shared", Rate: rate, Burst: burst, Want: want})
				answered := wall()
				mu.Lock()
				if err != nil {
					failed = err
				}
				grants = append(grants, budgetGrant{sent: sent, answered: answered, granted: g.Granted})
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("draw: %v", failed)
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].sent.Before(grants[j].sent) })
	total := 0
	var last time.Time
	for _, g := range grants {
		total += g.granted
		if g.answered.After(last) {
			last = g.answered
		}
	}
	elapsed := last.Sub(start)
	t.Logf("%d draws on two stores granted %d tokens in %v (bound %.0f)", len(grants), total, elapsed, burst+rate*elapsed.Seconds())
	if total < burst {
		t.Errorf("granted %d tokens in all; want at least the burst of %d", total, burst)
	}
	// Every window [first sent, last answered] of a run of draws in the order sent: the
	// draws of a window were all refilled within it, on any clock that runs at the rate of
	// the test's. SQLite stores the refill time to the millisecond, down: a window's first
	// refill may count up to a millisecond from before it.
	slack := 0.0
	if b.Dialect == SQLite {
		slack = rate * time.Millisecond.Seconds()
	}
	// A window that starts at a draw granted nothing grants what the window from the next
	// granted draw does, with a bound at least as large, so only windows starting at a
	// granted draw are checked: the others cannot fail where those pass, and there are
	// thousands of empty draws on a fast store.
	for i := range grants {
		if grants[i].granted == 0 {
			continue
		}
		sum := 0
		var end time.Time
		for j := i; j < len(grants); j++ {
			sum += grants[j].granted
			if grants[j].answered.After(end) {
				end = grants[j].answered
			}
			if limit := float64(burst) + rate*end.Sub(grants[i].sent).Seconds() + slack; float64(sum) > limit {
				t.Fatalf("draws %d..%d were granted %d tokens within %v; the bound is burst + rate*elapsed = %.1f", i, j, sum, end.Sub(grants[i].sent), limit)
			}
		}
	}
}
