package static_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
)

// pingHost is a real HTTP server standing in for a runtime host: it answers its probes
// with status, and counts them.
type pingHost struct {
	*httptest.Server
	status atomic.Int32
	probes atomic.Int32
}

func newPingHost(t *testing.T, status int) *pingHost {
	h := &pingHost{}
	h.status.Store(int32(status))
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.probes.Add(1)
		w.WriteHeader(int(h.status.Load()))
	}))
	t.Cleanup(h.Close)
	return h
}

// TestProvisionInstantlyTakesOnlyHostsHeardFromRecently: on each real store, a runtime is
// provisioned in one transaction only on a host whose latest probe succeeded within the
// probe cache's life; the transaction itself probes nothing. Before any probe, and once the
// results are older than that, nothing is written and the caller is told to go the usual
// way; a host that failed its probe takes nothing, even when it has the most room.
func TestProvisionInstantlyTakesOnlyHostsHeardFromRecently(t *testing.T) {
	for name, open := range realStores {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := open(t, ctx)
			up, down := newPingHost(t, http.StatusOK), newPingHost(t, http.StatusServiceUnavailable)
			clk := testclock.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			spec := fmt.Sprintf(`{"runtimes": [{"host": %q, "slots": 2}, {"host": %q, "slots": 8}], "health_path": "/v1/ping"}`, up.URL, down.URL)
			env, err := static.New("pool", json.RawMessage(spec), environ.Deps{Slots: st, Resources: st, Clock: clk})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			instant := env.(environ.InstantProvisioner)
			provision := func(name string) (domain.Resource, *environ.Resource, error) {
				r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice", Args: map[string]any{"slots": 1}})
				if err != nil {
					t.Fatal(err)
				}
				var recorded domain.Resource
				out, err := instant.ProvisionInstantly(ctx, &environ.Resource{ID: r.ID, Type: r.Type}, &environ.ResourceOptions{Owner: r.Owner, Args: r.Args, Generation: r.Generation},
					domain.InstantProvision{Generation: r.Generation, Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime},
						Units: 1, Message: domain.ReadyMessage(r.Generation, ""), Recorded: &recorded})
				if err != nil {
					if got, gerr := st.GetResource(ctx, r.ID); gerr != nil || got.Status != domain.StatusPending || got.Reason != domain.ReasonCreated {
						t.Errorf("a refused instant provision changed the row: %+v, %v", got, gerr)
					}
				}
				return recorded, out, err
			}

			if _, _, err := provision("before-any-probe"); !errors.Is(err, domain.ErrNotInstant) {
				t.Errorf("before any probe: %v, want ErrNotInstant", err)
			}
			if n := up.probes.Load() + down.probes.Load(); n != 0 {
				t.Errorf("%d probes sent by an instant provision, want none", n)
			}

			_ = env.Check(ctx) // probes every host: one up, one down
			recorded, out, err := provision("after-check")
			if err != nil {
				t.Fatalf("after the pool's check: %v", err)
			}
			if out.State["host"] != up.URL || recorded.Status != domain.StatusReady || recorded.State["host"] != up.URL {
				t.Errorf("placed %v, recorded %s on %v; want ready on the host that answered, %s", out.State, recorded.Status, recorded.State["host"], up.URL)
			}
			probes := up.probes.Load() + down.probes.Load()

			clk.Advance(time.Minute) // the results are now older than the probe cache
			if _, _, err := provision("results-stale"); !errors.Is(err, domain.ErrNotInstant) {
				t.Errorf("with stale results: %v, want ErrNotInstant", err)
			}
			if n := up.probes.Load() + down.probes.Load(); n != probes {
				t.Errorf("%d probes sent by an instant provision, want none", n-probes)
			}
			rs, err := st.ListReservations(ctx, "pool")
			if err != nil || len(rs) != 1 {
				t.Errorf("reservations %v, %v; want the one instant provision's", rs, err)
			}
		})
	}
}
