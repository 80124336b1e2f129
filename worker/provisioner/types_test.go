package provisioner_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres/postgrestest"
	"github.com/berth-dev/berth/domain/sqlite"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/worker/provisioner"
)

// typesSuite adds a resource type the way an environ does, and nothing else: a fake environ
// registers environtest.Widget, and a widget goes through create, ready, update and delete
// on each real store with the real worker, the registry's catalog checking its args.
type typesSuite struct{}

var _ = gc.Suite(&typesSuite{})

// shippedCatalog is the catalog of a registry of the environs Berth ships with, as berth run
// builds it: it serves runtimes and ClickHouse databases.
func shippedCatalog() *environ.Catalog {
	registry := environ.NewRegistry()
	registry.Register(static.Type, static.New, static.Types...)
	registry.Register(kubernetes.Type, kubernetes.New, kubernetes.Types...)
	return registry.Catalog()
}

// typeStore is a real store and a way to write to it as a client with plain SQL would.
type typeStore struct {
	domain.State
	exec func(ctx context.Context, query string, args ...any) error
}

// typeStores open each real store on a fresh, migrated database, and return it with what
// closes it.
var typeStores = map[string]func(c *gc.C, ctx context.Context) (typeStore, func()){
	"postgres": func(c *gc.C, ctx context.Context) (typeStore, func()) {
		st, cleanup, err := postgrestest.New(ctx)
		c.Assert(err, gc.IsNil)
		return typeStore{st, func(ctx context.Context, query string, args ...any) error {
			_, err := st.Pool().Exec(ctx, query, args...)
			return err
		}}, cleanup
	},
	"sqlite": func(c *gc.C, ctx context.Context) (typeStore, func()) {
		st, err := sqlite.Open(ctx, filepath.Join(c.MkDir(), "berth.db"))
		c.Assert(err, gc.IsNil)
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			c.Fatal(err)
		}
		return typeStore{st, func(ctx context.Context, query string, args ...any) error {
			_, err := st.DB().ExecContext(ctx, query, args...)
			return err
		}}, st.Close
	},
}

// widgetEnviron serves widgets: it records the args of each reconcile and the deprovisions,
// and reports a widget's size in its config.
type widgetEnviron struct {
	mu          sync.Mutex
	reconciled  []map[string]any
	deprovision []string
}

func (w *widgetEnviron) environ() *environtest.Environ {
	return &environtest.Environ{
		TypeFn:     func() string { return "widgets" },
		SupportsFn: func(t domain.ResourceType) bool { return t == environtest.WidgetName },
		ReconcileFn: func(_ context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.reconciled = append(w.reconciled, opts.Args)
			size := opts.Args["size"]
			if size == nil {
				size = 1
			}
			return &environ.Resource{ID: r.ID, Type: r.Type, State: map[string]any{"made": true}, Config: map[string]any{"size": size}}, nil
		},
		DeprovisionFn: func(_ context.Context, r *environ.Resource) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.deprovision = append(w.deprovision, r.ID)
			return nil
		},
	}
}

func (w *widgetEnviron) calls() (reconciled []map[string]any, deprovisioned []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(reconciled, w.reconciled...), append(deprovisioned, w.deprovision...)
}

func (s *typesSuite) TestATypeAddedByItsEnvironGoesThroughItsLifecycle(c *gc.C) {
	for name, open := range typeStores {
		c.Logf("store %s", name)
		s.checkWidgetLifecycle(c, open)
	}
}

func (s *typesSuite) checkWidgetLifecycle(c *gc.C, open func(c *gc.C, ctx context.Context) (typeStore, func())) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, closeStore := open(c, ctx)
	defer closeStore()
	widgets := &widgetEnviron{}
	registry := environ.NewRegistry()
	registry.Register("widgets", func(string, json.RawMessage, environ.Deps) (environ.Environ, error) {
		return widgets.environ(), nil
	}, environtest.Widget)
	set, err := registry.NewSet([]byte(`{"shop": {"type": "widgets", "spec": {}}}`), "", environ.Deps{})
	c.Assert(err, gc.IsNil)
	types := registry.Catalog()
	svc := domain.NewService(st, types)

	// The catalog checks a widget's args, naming the field, before anything is stored.
	_, err = types.ParseArgFlags(environtest.WidgetName, []string{"size=11"})
	var fe *domain.FieldError
	c.Assert(errors.As(err, &fe), gc.Equals, true, gc.Commentf("%v", err))
	c.Check(fe.Field, gc.Equals, "args.size")
	_, err = svc.Create(ctx, domain.NewResource{Type: environtest.WidgetName, Name: "w", Args: map[string]any{"weight": 2}})
	c.Assert(errors.As(err, &fe), gc.Equals, true, gc.Commentf("%v", err))
	c.Check(fe.Field, gc.Equals, "args.weight")

	args, err := types.ParseArgFlags(environtest.WidgetName, []string{"size=3", "colour=7"})
	c.Assert(err, gc.IsNil)
	r, err := svc.Create(ctx, domain.NewResource{Type: environtest.WidgetName, Name: "w", Owner: "acme", Args: args})
	c.Assert(err, gc.IsNil)

	metrics := newFakeMetrics()
	watcher := newFakeWatcher()
	w, err := provisioner.NewWorker(provisioner.Config{
		State:      st,
		Environs:   set,
		NewWatcher: func() (provisioner.Watcher, error) { return watcher, nil },
		Clock:      testclock.NewClock(time.Now()),
		Rand:       func() float64 { return 0.5 },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:    metrics,
		Locks:      new(resourcelock.Set),
		Settings: provisioner.Settings{
			Agent:            domain.AgentIdentity{ID: holder, TTL: 15 * time.Second},
			Concurrency:      1,
			AwaitConcurrency: 1,
			LeaseTTL:         leaseTTL,
			ReconcileTimeout: reconcileTimeout,
			BackoffBase:      backoffBase,
			BackoffMax:       backoffMax,
			CapacityRetry:    capacityRetry,
			ShareGrace:       2 * time.Second,

			OwnerPoliciesInterval: 10 * time.Second,
		},
	})
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)

	// Create: the default provisioner serves widgets, so it takes the row and makes it ready.
	watcher.send(c, r.ID)
	c.Assert(metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeReady})
	got, err := st.GetResource(ctx, r.ID)
	c.Assert(err, gc.IsNil)
	c.Check(got.Status, gc.Equals, domain.StatusReady)
	c.Check(got.Provisioner, gc.Equals, "shop")
	c.Check(got.Config["size"], gc.Equals, float64(3))
	c.Check(got.Args["colour"], gc.Equals, "7") // a String arg stays text

	// Update: new args bring the widget to its next generation.
	_, err = svc.UpdateArgs(ctx, r.ID, map[string]any{"size": 5}, nil)
	c.Assert(err, gc.IsNil)
	watcher.send(c, r.ID)
	c.Assert(metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeReady, provisioner.OutcomeReady})
	got, err = st.GetResource(ctx, r.ID)
	c.Assert(err, gc.IsNil)
	c.Check(got.Status, gc.Equals, domain.StatusReady)
	c.Check(got.ObservedGeneration, gc.Equals, int64(2))
	c.Check(got.Config["size"], gc.Equals, float64(5))

	// Delete: the environ lets go of it and the row is removed.
	_, err = svc.Delete(ctx, r.ID)
	c.Assert(err, gc.IsNil)
	watcher.send(c, r.ID)
	c.Assert(metrics.waitOutcomes(c, 3)[2], gc.Equals, provisioner.OutcomeDeleted)
	_, err = st.GetResource(ctx, r.ID)
	c.Check(errors.Is(err, domain.ErrNotFound), gc.Equals, true, gc.Commentf("%v", err))
	reconciled, deprovisioned := widgets.calls()
	c.Check(reconciled, gc.HasLen, 2)
	c.Check(reconciled[1]["size"], gc.Equals, float64(5))
	c.Check(deprovisioned, gc.DeepEquals, []string{r.ID})

	// A row of a type no environ serves, written with plain SQL, fails for good with an error
	// naming its type and the served ones.
	c.Assert(st.exec(ctx, `INSERT INTO resources (type, name, provisioner) VALUES ('gizmo', 'g', 'shop')`), gc.IsNil)
	rows, err := st.ListResources(ctx, domain.ListFilter{Type: "gizmo"})
	c.Assert(err, gc.IsNil)
	c.Assert(rows, gc.HasLen, 1)
	watcher.send(c, rows[0].ID)
	c.Assert(metrics.waitOutcomes(c, 4)[3], gc.Equals, provisioner.OutcomePermanent)
	got, err = st.GetResource(ctx, rows[0].ID)
	c.Assert(err, gc.IsNil)
	c.Check(got.Status, gc.Equals, domain.StatusError)
	c.Check(got.Reason, gc.Equals, domain.ReasonUnknownType)
	c.Check(got.NextAttemptAt, gc.IsNil)
	for _, part := range []string{`"gizmo"`, "it serves widget"} {
		c.Check(strings.Contains(got.LastError, part), gc.Equals, true, gc.Commentf("last error %q does not say %s", got.LastError, part))
	}
	// It can still be deleted: its environ is asked to let go of whatever it may hold.
	_, err = svc.Delete(ctx, got.ID)
	c.Assert(err, gc.IsNil)
	watcher.send(c, got.ID)
	c.Assert(metrics.waitOutcomes(c, 5)[4], gc.Equals, provisioner.OutcomeDeleted)
	_, err = st.GetResource(ctx, got.ID)
	c.Check(errors.Is(err, domain.ErrNotFound), gc.Equals, true, gc.Commentf("%v", err))
}
