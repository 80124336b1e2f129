package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// within bounds the waits of the controls' tests: each step is one reconcile of a static
// runtime, which takes milliseconds; the bound leaves room for a loaded machine.
const within = 30 * time.Second

// TestHibernateAndWake hibernates a ready static runtime through plain SQL: it goes
// hibernated and its slots are freed. Woken, it is ready again on the host it had, although
// a new runtime would have gone to the other host meanwhile.
func TestHibernateAndWake(t *testing.T) { testHibernateAndWake(t, e2etest.Postgres) }

// TestHibernateAndWakeSQLite is TestHibernateAndWake on the embedded store.
func TestHibernateAndWakeSQLite(t *testing.T) { testHibernateAndWake(t, e2etest.SQLite) }

func testHibernateAndWake(t *testing.T, store e2etest.Store) {
	e := newEnvOn(t, store, map[string]int{"a": 4, "b": 4})
	a := e.startAgent()
	ctx := context.Background()

	x := e.create("--name", "x", "--owner", "alice", "--arg", "slots=2", "--wait")
	host, _ := e.get(x).Config["host"].(string)
	if host != e.hosts["a"].url {
		t.Fatalf("x placed on %s, want a (listed first, both empty)", host)
	}

	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET hibernate = true WHERE id = $1`, x); err != nil {
		t.Fatal(err)
	}
	e.eventually("x hibernated, its slots freed", within, func() (bool, string) {
		r := e.get(x)
		held := e.queryInt("SELECT count(*) FROM slot_reservations WHERE resource_id = $1", x)
		return r.Status == "hibernated" && held == 0, fmt.Sprintf("%s: %s; %d reservations", r.Status, r.StatusMessage, held)
	})
	if used := e.reservedOn(host); used != 0 {
		t.Errorf("a holds %d slots while x is hibernated, want 0", used)
	}
	if r := e.get(x); r.Config["host"] != host {
		t.Errorf("hibernated x's config %v, want it kept (host %s)", r.Config, host)
	}

	// w takes a slot of a: a has 3 free, b 4, so a new runtime of 2 slots would go to b.
	w := e.create("--name", "w", "--owner", "carol", "--arg", "slots=1", "--wait")
	if got := e.get(w).Config["host"]; got != host {
		t.Fatalf("w placed on %v, want a", got)
	}

	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET hibernate = false WHERE id = $1`, x); err != nil {
		t.Fatal(err)
	}
	e.eventually("x woken", within, func() (bool, string) {
		r := e.get(x)
		return r.Status == "ready", r.Status + ": " + r.StatusMessage
	})
	if got := e.get(x).Config["host"]; got != host {
		t.Errorf("x woken on %v, want its host before hibernating, %s", got, host)
	}
	if used := e.reservedOn(host); used != 3 {
		t.Errorf("a holds %d slots once x is woken, want 3 (x's 2 and w's 1)", used)
	}
	if n := e.queryInt(`SELECT count(*) FROM resource_events WHERE resource_id = $1 AND kind = 'status' AND message = 'waking generation 1'`, x); n != 1 {
		t.Errorf("%d 'waking generation 1' events of x, want 1", n)
	}
	e.assertNoOverfill()
	a.stop(t)
}

// reservedOn is how many slots the pool's reservations hold on host url.
func (e *env) reservedOn(url string) int {
	e.t.Helper()
	return e.queryInt(`SELECT CAST(coalesce(sum(slots), 0) AS integer) FROM slot_reservations WHERE host = $1`, url)
}

// TestPauseHoldsArgsUntilResume pauses a ready runtime through plain SQL and changes its
// args: the agent takes the change up (it claims the row) and applies nothing until the
// runtime is resumed, and then applies it.
func TestPauseHoldsArgsUntilResume(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 4})
	a := e.startAgent()
	ctx := context.Background()

	y := e.create("--name", "y", "--owner", "alice", "--arg", "slots=1", "--wait")
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET paused = true WHERE id = $1`, y); err != nil {
		t.Fatal(err)
	}
	claims := e.queryInt(`SELECT lease_token FROM resources WHERE id = $1`, y)
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET args = '{"slots": 2}' WHERE id = $1`, y); err != nil {
		t.Fatal(err)
	}
	e.eventually("the agent looked at the paused runtime and let it go", within, func() (bool, string) {
		token := e.queryInt(`SELECT lease_token FROM resources WHERE id = $1`, y)
		held := e.queryInt(`SELECT count(*) FROM resources WHERE id = $1 AND lease_holder IS NOT NULL`, y)
		return token > claims && held == 0, fmt.Sprintf("lease token %d (was %d), held %d", token, claims, held)
	})
	r := e.get(y)
	if r.Status != "ready" || r.Generation != 2 || r.ObservedGeneration != 1 || r.Config["cpu"] != float64(1) {
		t.Errorf("paused y after an args change: %+v, config %v; want ready at generation 1 of 2, one slot's config", r, r.Config)
	}
	if held := e.reservedOn(e.hosts["a"].url); held != 1 {
		t.Errorf("a holds %d slots while y is paused, want its 1", held)
	}

	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET paused = false WHERE id = $1`, y); err != nil {
		t.Fatal(err)
	}
	r = e.WaitReady(y, within)
	if r.ObservedGeneration != 2 || r.Config["cpu"] != float64(2) || e.reservedOn(e.hosts["a"].url) != 2 {
		t.Errorf("y after resuming: %+v, config %v; want its two slots", r, r.Config)
	}
	a.stop(t)
}

// TestRetryRequestReconcilesAtOnce: a runtime that failed for good (its provisioner is not
// in the set) is not tried again at its generation; a retry requested through plain SQL
// reconciles it at once (it fails again: a new attempt), and once the row names a
// provisioner that exists, the next retry request brings it to ready.
func TestRetryRequestReconcilesAtOnce(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 1})
	a := e.startAgent()
	ctx := context.Background()

	var id string
	if err := e.SQL.QueryRowContext(ctx,
		`INSERT INTO resources (type, name, owner, provisioner, args) VALUES ('runtime', 'lost', 'alice', 'elsewhere', '{"slots": 1}') RETURNING CAST(id AS text)`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	e.eventually("a permanent error naming the provisioner", within, func() (bool, string) {
		r := e.get(id)
		return r.Status == "error" && strings.Contains(r.StatusMessage, "elsewhere"), r.String()
	})
	claims := e.queryInt(`SELECT lease_token FROM resources WHERE id = $1`, id)

	// The retry clears last_error; the agent claims the row at once and fails it again.
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET retry_requested_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	e.eventually("the retry reconciles it at once, failing again", within, func() (bool, string) {
		token := e.queryInt(`SELECT lease_token FROM resources WHERE id = $1`, id)
		failed := e.queryInt(`SELECT count(*) FROM resources WHERE id = $1 AND status = 'error' AND last_error <> '' AND lease_holder IS NULL`, id)
		return token > claims && failed == 1, fmt.Sprintf("lease token %d (was %d); %s", token, claims, e.get(id))
	})

	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET provisioner = 'pool' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET retry_requested_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	e.WaitReady(id, within)
	if n := e.queryInt(`SELECT count(*) FROM resource_events WHERE resource_id = $1 AND kind = 'control' AND message = 'retry requested'`, id); n != 2 {
		t.Errorf("%d 'retry requested' events, want 2", n)
	}
	a.stop(t)
}
