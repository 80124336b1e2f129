package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestQuotaHoldsAcrossAgents is issue 24's proof for quotas: two agents on one PostgreSQL, an
// owner at its quota, ten creates at once through the CLI. None lands over the quota, at any
// moment: the ten wait with reason QuotaExceeded and a message naming the quota. Raising the
// quota lets exactly as many through as it rose by, at once (the change wakes them).
func TestQuotaHoldsAcrossAgents(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 50, "b": 50})
	for _, id := range []string{"quota-one", "quota-two"} {
		e.StartAgent(id, "--poll-interval", "200ms", "--backoff-base", "100ms", "--backoff-max", "1s",
			"--capacity-retry", "500ms", "--health-interval", "1s", "--capacity-interval", "1s", "--concurrency", "8")
	}
	const (
		held   = 3
		racers = 10
		raised = 8
	)
	e.berth("quota", "set", "acme", "--provisioner", "pool", "--resources", fmt.Sprint(held), "--slots", "100")
	for i := range held {
		e.create("--name", fmt.Sprintf("held-%d", i), "--owner", "acme", "--arg", "slots=2", "--wait", "--timeout", "60s")
	}

	// Watch the owner's admitted and ready resources for the whole race.
	var worstAdmitted, worstReady atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for ctx.Err() == nil {
			var admitted, ready int64
			err := e.SQL.QueryRowContext(ctx, `
				SELECT count(*) FILTER (WHERE admitted_units IS NOT NULL), count(*) FILTER (WHERE status = 'ready')
				  FROM resources WHERE owner = 'acme'`).Scan(&admitted, &ready)
			if err != nil {
				return
			}
			worstAdmitted.Store(max(worstAdmitted.Load(), admitted))
			worstReady.Store(max(worstReady.Load(), ready))
			time.Sleep(5 * time.Millisecond)
		}
	}()

	var creates sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		creates.Add(1)
		go func() {
			defer creates.Done()
			_, _, errs[i] = e.tryBerth("resource", "create", "--type", "runtime", "--name", fmt.Sprintf("racer-%d", i),
				"--owner", "acme", "--arg", "slots=2")
		}()
	}
	creates.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create racer-%d: %v", i, err)
		}
	}
	e.eventually("every racer waiting for quota", 60*time.Second, func() (bool, string) {
		waiting := e.queryInt(`SELECT count(*) FROM resources WHERE owner = 'acme' AND status = 'pending' AND reason = 'QuotaExceeded'`)
		return waiting == racers, e.statusCounts()
	})
	want := `waiting for quota: owner "acme" on provisioner "pool": 3 of 3 resources, 6 of 100 slots; this resource needs 2 slots`
	if n := e.queryInt(`SELECT count(*) FROM resources WHERE owner = 'acme' AND status_message = $1`, want); n != racers {
		t.Errorf("%d racers say %q, want %d", n, want, racers)
	}

	raisedAt := time.Now()
	e.berth("quota", "set", "acme", "--provisioner", "pool", "--resources", fmt.Sprint(raised))
	e.eventually("the quota's room filled", 60*time.Second, func() (bool, string) {
		ready := e.queryInt(`SELECT count(*) FROM resources WHERE owner = 'acme' AND status = 'ready'`)
		return ready == raised, e.statusCounts()
	})
	t.Logf("%d waiting creates ready %s after the quota rose", raised-held, time.Since(raisedAt).Round(time.Millisecond))
	// The rest keep waiting, through retries of both agents.
	time.Sleep(2 * time.Second)
	stop()
	watch.Wait()
	if got := e.queryInt(`SELECT count(*) FROM resources WHERE owner = 'acme' AND status = 'pending' AND reason = 'QuotaExceeded'`); got != held+racers-raised {
		t.Errorf("%d still waiting for quota, want %d (%s)", got, held+racers-raised, e.statusCounts())
	}
	if worstAdmitted.Load() > raised || worstReady.Load() > raised {
		t.Fatalf("at worst %d admitted and %d ready, quota at most %d", worstAdmitted.Load(), worstReady.Load(), raised)
	}
	if got := e.queryInt(`SELECT count(*) FROM resources WHERE owner = 'acme' AND admitted_units IS NOT NULL`); got != raised {
		t.Fatalf("%d admitted, want %d", got, raised)
	}
	if out := e.berth("quota", "get", "acme"); !strings.Contains(out, "8/8") || !strings.Contains(out, "16/100") {
		t.Errorf("quota get printed:\n%s\nwant 8/8 resources and 16/100 slots", out)
	}
}
