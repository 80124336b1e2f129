package static_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/internal/pgtest"
)

const poolOfThree = `{"runtimes": [
	{"host": "http://a:9091", "slots": 10},
	{"host": "http://b:9091", "slots": 10},
	{"host": "http://c:9091", "slots": 10}
]}`

// healthyHosts answers every health probe with 200 OK.
type healthyHosts struct{}

func (healthyHosts) Do(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: http.NoBody, Request: req}, nil
}

// TestTwoAgentsNeverOverfill races 64 reconciles through two environs of one provisioner, each
// on its own connection pool to one database, as two agents would: no host may ever hold more
// slots than it has, and every refusal must be a true lack of room.
func TestTwoAgentsNeverOverfill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := pgtest.New(t)
	var agents [2]environ.Environ
	var states [2]*postgres.State
	for i := range agents {
		st, err := postgres.Open(ctx, url, postgres.PoolConfig{})
		if err != nil {
			t.Fatalf("open agent %d's pool: %v", i, err)
		}
		t.Cleanup(st.Close)
		if err := st.Migrate(ctx); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		env, err := static.NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(poolOfThree), environ.Deps{Slots: st})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		agents[i], states[i] = env, st
	}

	type outcome struct {
		id    string
		slots int
		res   *environ.Resource
		err   error
	}
	const n = 64
	outcomes := make([]outcome, n)
	for i := range outcomes {
		outcomes[i] = outcome{id: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), slots: 1 + i%3}
	}

	// A monitor reads the committed per-host totals for as long as the reconciles run.
	done := make(chan struct{})
	monitorErr := make(chan error, 1)
	go func() {
		monitorErr <- func() error {
			for {
				if err := assertNoHostOverfilled(ctx, states[0]); err != nil {
					return err
				}
				select {
				case <-done:
					return nil
				default:
				}
			}
		}()
	}()

	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range outcomes {
		wg.Add(1)
		go func(o *outcome, agent environ.Environ) {
			defer wg.Done()
			<-start
			opts := &environ.ResourceOptions{Owner: fmt.Sprintf("owner-%d", i%5), Args: map[string]any{"slots": float64(o.slots)}}
			o.res, o.err = agent.Reconcile(ctx, &environ.Resource{ID: o.id, Type: domain.ResourceTypeRuntime}, opts)
		}(&outcomes[i], agents[i%2])
	}
	close(start)
	wg.Wait()
	close(done)
	if err := <-monitorErr; err != nil {
		t.Fatal(err)
	}
	if err := assertNoHostOverfilled(ctx, states[1]); err != nil {
		t.Fatal(err)
	}

	reservations, err := states[1].ListReservations(ctx, "pool")
	if err != nil {
		t.Fatalf("ListReservations: %v", err)
	}
	byID := make(map[string]domain.Reservation, len(reservations))
	free := map[string]int{"http://a:9091": 10, "http://b:9091": 10, "http://c:9091": 10}
	for _, r := range reservations {
		byID[r.ResourceID] = r
		free[r.Host] -= r.Slots
	}
	var succeeded, refused int
	for _, o := range outcomes {
		r, reserved := byID[o.id]
		switch {
		case o.err == nil:
			succeeded++
			if !reserved || r.Host != o.res.State["host"] || r.Slots != o.slots || o.res.State["slots"] != o.slots {
				t.Errorf("runtime %s: reconciled to %v but the reservation is %+v (present: %v)", o.id, o.res.State, r, reserved)
			}
		case errors.Is(o.err, domain.ErrNoCapacity):
			refused++
			if reserved {
				t.Errorf("runtime %s: refused (%v) but holds %+v", o.id, o.err, r)
			}
			// Slots were only ever taken during the race, so a refusal was right only if no
			// host has room for it even now.
			for host, f := range free {
				if f >= o.slots {
					t.Errorf("runtime %s: refused %d slots while %s has %d free at the end", o.id, o.slots, host, f)
				}
			}
		default:
			t.Errorf("runtime %s: %v, want success or ErrNoCapacity", o.id, o.err)
		}
	}
	if len(reservations) != succeeded || succeeded == 0 || refused == 0 {
		t.Errorf("%d reservations, %d successes, %d refusals; want reservations = successes and some of each", len(reservations), succeeded, refused)
	}

	// Reconciling through the other agent again changes nothing.
	for i, o := range outcomes {
		if o.err != nil {
			continue
		}
		opts := &environ.ResourceOptions{Owner: fmt.Sprintf("owner-%d", i%5), Args: map[string]any{"slots": float64(o.slots)}}
		again, err := agents[(i+1)%2].Reconcile(ctx, &environ.Resource{ID: o.id, Type: domain.ResourceTypeRuntime}, opts)
		if err != nil || again.State["host"] != o.res.State["host"] {
			t.Errorf("runtime %s reconciled again: %v, %v; want it unchanged on %v", o.id, again, err, o.res.State["host"])
		}
	}
	if err := agents[0].Check(ctx); err != nil {
		t.Errorf("Check: %v", err)
	}

	// Deprovisioning everything (refused ones too) through both agents frees every slot.
	for i := range outcomes {
		wg.Add(1)
		go func(id string, agent environ.Environ) {
			defer wg.Done()
			if err := agent.Deprovision(ctx, &environ.Resource{ID: id, Type: domain.ResourceTypeRuntime}); err != nil {
				t.Errorf("Deprovision %s: %v", id, err)
			}
		}(outcomes[i].id, agents[(i+1)%2])
	}
	wg.Wait()
	var left int
	if err := states[0].Pool().QueryRow(ctx, `SELECT count(*) FROM slot_reservations`).Scan(&left); err != nil {
		t.Fatalf("count reservations: %v", err)
	}
	if left != 0 {
		t.Errorf("%d reservations left after deprovisioning everything", left)
	}
}

func assertNoHostOverfilled(ctx context.Context, st *postgres.State) error {
	rows, err := st.Pool().Query(ctx, `SELECT host, sum(slots)::int FROM slot_reservations WHERE provisioner = 'pool' GROUP BY host`)
	if err != nil {
		return fmt.Errorf("read host totals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var host string
		var used int
		if err := rows.Scan(&host, &used); err != nil {
			return fmt.Errorf("read host totals: %w", err)
		}
		if used > 10 {
			return fmt.Errorf("host %s holds %d slots of 10", host, used)
		}
	}
	return rows.Err()
}

// TestSpecChangeReplacesRuntimesOnRealStore reconciles a pool's runtimes after the operator
// removed host a, cut b below what it holds and added d, through two agents at once: a's
// runtimes move to hosts with room, b keeps what it holds and takes nothing new, and every
// runtime holds exactly one reservation.
func TestSpecChangeReplacesRuntimesOnRealStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := pgtest.New(t)
	open := func(spec string) (environ.Environ, *postgres.State) {
		t.Helper()
		st, err := postgres.Open(ctx, url, postgres.PoolConfig{})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(st.Close)
		if err := st.Migrate(ctx); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		env, err := static.NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(spec), environ.Deps{Slots: st})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return env, st
	}
	const a, b, c, d = "http://a:9091", "http://b:9091", "http://c:9091", "http://d:9091"
	before, st := open(`{"runtimes": [{"host": "http://a:9091", "slots": 4}, {"host": "http://b:9091", "slots": 4}, {"host": "http://c:9091", "slots": 4}]}`)
	id := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
	opts := func(i int) *environ.ResourceOptions {
		return &environ.ResourceOptions{Owner: fmt.Sprintf("owner-%d", i%3), Args: map[string]any{"slots": float64(1 + i%2)}}
	}
	// Six runtimes of 1 or 2 slots (9 of the pool's 12), spread over a, b and c.
	const n = 6
	placed := map[string]string{}
	for i := 0; i < n; i++ {
		res, err := before.Reconcile(ctx, &environ.Resource{ID: id(i), Type: domain.ResourceTypeRuntime}, opts(i))
		if err != nil {
			t.Fatalf("Reconcile %d before the change: %v", i, err)
		}
		placed[id(i)] = res.State["host"].(string)
	}
	onB := usedOn(t, ctx, st, b)
	if usedOn(t, ctx, st, a) == 0 || onB < 2 {
		t.Fatalf("placement before the change left a or b nearly empty: %v", placed)
	}

	const after = `{"runtimes": [{"host": "http://b:9091", "slots": 1}, {"host": "http://c:9091", "slots": 4}, {"host": "http://d:9091", "slots": 4}]}`
	agents := [2]environ.Environ{}
	agents[0], _ = open(after)
	agents[1], _ = open(after)
	var wg sync.WaitGroup
	errs := make([]error, n)
	results := make([]*environ.Resource, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = agents[i%2].Reconcile(ctx, &environ.Resource{ID: id(i), Type: domain.ResourceTypeRuntime}, opts(i))
		}(i)
	}
	wg.Wait()

	reservations, err := st.ListReservations(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if len(reservations) != n {
		t.Fatalf("%d reservations after the change, want one per runtime: %+v", len(reservations), reservations)
	}
	held := map[string]domain.Reservation{}
	for _, r := range reservations {
		held[r.ResourceID] = r
	}
	for i := 0; i < n; i++ {
		r := held[id(i)]
		switch was := placed[id(i)]; {
		case was == b:
			if errs[i] != nil || r.Host != b || results[i].Notice != "" {
				t.Errorf("runtime %d on b: %v, %v, now %+v; want it kept on b", i, results[i], errs[i], r)
			}
		case was == a && errs[i] == nil:
			if r.Host != c && r.Host != d || results[i].State["host"] != r.Host || !strings.Contains(results[i].Notice, "moved from "+a) {
				t.Errorf("runtime %d moved off a: %+v, reservation %+v; want it on c or d with a notice", i, results[i], r)
			}
		case was == a:
			if !errors.Is(errs[i], domain.ErrNoCapacity) || r.Host != a {
				t.Errorf("runtime %d on a: %v, reservation %+v; want it moved or kept on a for want of room", i, errs[i], r)
			}
		case errs[i] != nil || r.Host != was:
			t.Errorf("runtime %d on %s: %v, reservation %+v; want it kept", i, was, errs[i], r)
		}
	}
	for host, limit := range map[string]int{c: 4, d: 4} {
		if used := usedOn(t, ctx, st, host); used > limit {
			t.Errorf("host %s holds %d slots, more than its %d", host, used, limit)
		}
	}
	if got := usedOn(t, ctx, st, b); got != onB {
		t.Errorf("b holds %d slots after its cut, want the %d it held (no eviction)", got, onB)
	}
	if got := usedOn(t, ctx, st, a); got != 0 {
		t.Errorf("removed host a still holds %d slots, want every runtime moved (c and d have room)", got)
	}

	// b is over its configured slot: it takes nothing new, and Check says so.
	res, err := agents[0].Reconcile(ctx, &environ.Resource{ID: id(20), Type: domain.ResourceTypeRuntime},
		&environ.ResourceOptions{Owner: "new", Args: map[string]any{"slots": float64(1)}})
	if err != nil || res.State["host"] == b {
		t.Errorf("a new runtime after the change: %+v, %v; want it on c or d", res, err)
	}
	err = agents[1].Check(ctx)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("host %s has %d slots reserved but only 1 configured", b, onB)) {
		t.Errorf("Check = %v, want it to report b's cut", err)
	}

	// With only a one-slot host e left, a two-slot runtime can never move: it is refused for
	// good, naming the largest host, and keeps its slots.
	tiny, _ := open(`{"runtimes": [{"host": "http://e:9091", "slots": 1}]}`)
	const two = 1 // opts(1) asks for 2 slots
	was := held[id(two)]
	_, err = tiny.Reconcile(ctx, &environ.Resource{ID: id(two), Type: domain.ResourceTypeRuntime}, opts(two))
	var nf *domain.NeverFitsError
	if !errors.As(err, &nf) || nf.Largest != 1 {
		t.Errorf("moving a two-slot runtime to a one-slot pool = %v, want a NeverFitsError naming the 1-slot host", err)
	}
	if now, _ := st.GetReservation(ctx, "pool", id(two)); now != was {
		t.Errorf("reservation after a refused move = %+v, want it kept as %+v", now, was)
	}
}

func usedOn(t *testing.T, ctx context.Context, st *postgres.State, host string) int {
	t.Helper()
	var used int
	if err := st.Pool().QueryRow(ctx, `SELECT coalesce(sum(slots), 0)::int FROM slot_reservations WHERE provisioner = 'pool' AND host = $1`, host).Scan(&used); err != nil {
		t.Fatalf("read the slots on %s: %v", host, err)
	}
	return used
}
