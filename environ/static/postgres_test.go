package static_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
