package domain_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
)

// memStore is an in-memory ResourceStore for testing the Service's rules.
type memStore struct {
	rows    map[string]domain.Resource
	nextID  int
	created []domain.NewResource
	gets    int
}

func newMemStore() *memStore { return &memStore{rows: map[string]domain.Resource{}} }

func (m *memStore) CreateResource(_ context.Context, r domain.NewResource) (domain.Resource, error) {
	m.created = append(m.created, r)
	m.nextID++
	row := domain.Resource{
		ID: fmt.Sprintf("id-%d", m.nextID), Type: r.Type, Name: r.Name, Owner: r.Owner,
		Provisioner: r.Provisioner, Args: maps.Clone(r.Args), Labels: maps.Clone(r.Labels), Generation: 1, Status: domain.StatusPending,
	}
	m.rows[row.ID] = row
	return row, nil
}

func (m *memStore) GetResource(_ context.Context, id string) (domain.Resource, error) {
	m.gets++
	r, ok := m.rows[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	return r, nil
}

func (m *memStore) ListResources(context.Context, domain.ListFilter) ([]domain.Resource, error) {
	var out []domain.Resource
	for _, r := range m.rows {
		out = append(out, r)
	}
	return out, nil
}

func (m *memStore) UpdateResourceArgs(_ context.Context, id string, args map[string]any) (domain.Resource, error) {
	r, ok := m.rows[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	if r.Status == domain.StatusDeleting {
		return domain.Resource{}, domain.ErrStale
	}
	if !reflect.DeepEqual(r.Args, args) {
		r.Generation++
	}
	r.Args = args
	m.rows[id] = r
	return r, nil
}

func (m *memStore) RequestDelete(_ context.Context, id string) (domain.Resource, error) {
	r, ok := m.rows[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	r.Status = domain.StatusDeleting
	m.rows[id] = r
	return r, nil
}

// update applies change to the row with id, as the stores' controls do.
func (m *memStore) update(id string, change func(*domain.Resource)) (domain.Resource, error) {
	r, ok := m.rows[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	change(&r)
	m.rows[id] = r
	return r, nil
}

func (m *memStore) ForgetResource(_ context.Context, id string, _ domain.Forgetting) (domain.Resource, error) {
	r, ok := m.rows[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	delete(m.rows, id)
	return r, nil
}

func (m *memStore) SetProvisioner(_ context.Context, id, provisioner string) (domain.Resource, error) {
	return m.update(id, func(r *domain.Resource) { r.Provisioner = provisioner })
}

func (m *memStore) SetPaused(_ context.Context, id string, paused bool) (domain.Resource, error) {
	return m.update(id, func(r *domain.Resource) { r.Paused = paused })
}

func (m *memStore) SetHibernate(_ context.Context, id string, hibernate bool) (domain.Resource, error) {
	return m.update(id, func(r *domain.Resource) { r.Hibernate = hibernate })
}

func (m *memStore) RequestRetry(_ context.Context, id string) (domain.Resource, error) {
	return m.update(id, func(r *domain.Resource) { r.Attempts, r.NextAttemptAt, r.LastError = 0, nil, "" })
}

func (m *memStore) SetLabels(_ context.Context, id string, labels map[string]string) (domain.Resource, error) {
	return m.update(id, func(r *domain.Resource) { r.Labels = maps.Clone(labels) })
}

func (m *memStore) ChangeLabels(_ context.Context, id string, set map[string]string, remove []string) (domain.Resource, error) {
	r, ok := m.rows[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	merged, err := domain.MergeLabels(r.Labels, set, remove)
	if err != nil {
		return domain.Resource{}, err
	}
	return m.update(id, func(r *domain.Resource) { r.Labels = merged })
}

func fieldOf(t *testing.T, err error) string {
	t.Helper()
	var fe *domain.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a *domain.FieldError", err)
	}
	return fe.Field
}

func TestCreateValidatesAndNormalises(t *testing.T) {
	store := newMemStore()
	svc := domain.NewService(store, testTypes)
	r, err := svc.Create(context.Background(), domain.NewResource{
		Type: domain.ResourceTypeRuntime, Name: "  analytics ", Owner: " acme ",
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "analytics" || r.Owner != "acme" {
		t.Errorf("name/owner not trimmed: %q %q", r.Name, r.Owner)
	}
	if store.created[0].Args == nil || len(store.created[0].Args) != 0 {
		t.Errorf("nil args should be stored as {}, got %#v", store.created[0].Args)
	}
}

func TestCreateRejectsBadInputNamingTheField(t *testing.T) {
	long := strings.Repeat("é", domain.MaxNameLength+1)
	tests := []struct {
		name  string
		in    domain.NewResource
		field string
		msg   string
	}{
		{"unknown type", domain.NewResource{Type: "vm", Name: "a"}, "type", `"vm" is not a resource type: use one of runtime, clickhouse`},
		{"empty name", domain.NewResource{Type: "runtime", Name: "   "}, "name", "is required"},
		{"long name", domain.NewResource{Type: "runtime", Name: long}, "name", "at most 128"},
		{"control char", domain.NewResource{Type: "runtime", Name: "a\nb"}, "name", "control character"},
		{"long owner", domain.NewResource{Type: "runtime", Name: "a", Owner: long}, "owner", "at most 128"},
		{"unknown arg", domain.NewResource{Type: "runtime", Name: "a", Args: map[string]any{"cpu": 2}}, "args.cpu", "unknown key"},
		{"bad slots", domain.NewResource{Type: "runtime", Name: "a", Args: map[string]any{"slots": 0}}, "args.slots", "at least 1"},
		{"clickhouse takes none", domain.NewResource{Type: "clickhouse", Name: "a", Args: map[string]any{"slots": 1}}, "args.slots", "takes no keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newMemStore()
			_, err := domain.NewService(store, testTypes).Create(context.Background(), tt.in)
			if err == nil {
				t.Fatal("want an error")
			}
			if got := fieldOf(t, err); got != tt.field {
				t.Errorf("field = %q, want %q (%v)", got, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if len(store.created) != 0 {
				t.Error("invalid resource reached the store")
			}
		})
	}
}

func TestUpdateArgsMergesAndUnsets(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	svc := domain.NewService(store, testTypes)
	r, err := svc.Create(ctx, domain.NewResource{Type: "runtime", Name: "a", Args: map[string]any{"slots": 2, "version": "1.0"}})
	if err != nil {
		t.Fatal(err)
	}

	r, err = svc.UpdateArgs(ctx, r.ID, map[string]any{"slots": 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"slots": 4, "version": "1.0"}; !reflect.DeepEqual(r.Args, want) {
		t.Errorf("merged args = %v, want %v", r.Args, want)
	}
	if r.Generation != 2 {
		t.Errorf("generation = %d, want 2", r.Generation)
	}

	r, err = svc.UpdateArgs(ctx, r.ID, nil, []string{"version"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"slots": 4}; !reflect.DeepEqual(r.Args, want) {
		t.Errorf("args after unset = %v, want %v", r.Args, want)
	}
}

func TestUpdateArgsRejects(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	svc := domain.NewService(store, testTypes)
	r, err := svc.Create(ctx, domain.NewResource{Type: "runtime", Name: "a", Args: map[string]any{"slots": 2}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		set   map[string]any
		unset []string
		field string
	}{
		{"merged result invalid", map[string]any{"slots": "many"}, nil, "args.slots"},
		{"unknown key", map[string]any{"size": 3}, nil, "args.size"},
		{"unset missing key", nil, []string{"verison"}, "unset"},
		{"set and unset", map[string]any{"slots": 3}, []string{"slots"}, "unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.UpdateArgs(ctx, r.ID, tt.set, tt.unset)
			if got := fieldOf(t, err); got != tt.field {
				t.Errorf("field = %q, want %q (%v)", got, tt.field, err)
			}
			if got := store.rows[r.ID]; got.Generation != 1 || !reflect.DeepEqual(got.Args, map[string]any{"slots": 2}) {
				t.Errorf("rejected update changed the row: %+v", got)
			}
		})
	}

	if _, err := svc.UpdateArgs(ctx, "nope", map[string]any{"slots": 3}, nil); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("update of a missing resource: %v, want ErrNotFound", err)
	}
	if _, err := svc.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	_, err = svc.UpdateArgs(ctx, r.ID, map[string]any{"slots": 3}, nil)
	if !errors.Is(err, domain.ErrStale) {
		t.Errorf("update of a deleting resource: %v, want ErrStale", err)
	}
}

func TestUnreadableArgsAreReplacedNotMerged(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	svc := domain.NewService(store, testTypes)
	r, err := svc.Create(ctx, domain.NewResource{Type: "runtime", Name: "a", Args: map[string]any{"slots": 2}})
	if err != nil {
		t.Fatal(err)
	}
	row := store.rows[r.ID]
	row.Args = nil
	row.Unreadable = []domain.UnreadableColumn{{Column: "args", Reason: "number 1e+400 out of range"}}
	store.rows[r.ID] = row

	_, err = svc.UpdateArgs(ctx, r.ID, map[string]any{"slots": 3}, nil)
	if fieldOf(t, err) != "args" || !strings.Contains(err.Error(), "number 1e+400 out of range") || !strings.Contains(err.Error(), "--replace") {
		t.Errorf("merge into unreadable args: %v, want an args error naming the reason and --replace", err)
	}
	if _, err := svc.ReplaceArgs(ctx, r.ID, map[string]any{"slots": "many"}); fieldOf(t, err) != "args.slots" {
		t.Errorf("replace with invalid args: %v, want an args.slots error", err)
	}
	r, err = svc.ReplaceArgs(ctx, r.ID, map[string]any{"slots": 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"slots": 3}; !reflect.DeepEqual(r.Args, want) || r.Generation != 2 {
		t.Errorf("replaced: args %v at generation %d, want %v at 2", r.Args, r.Generation, want)
	}
}

func TestCreateRejectsBadLabels(t *testing.T) {
	for _, tt := range []struct {
		labels map[string]string
		msg    string
	}{
		{map[string]string{"berth.dev/team": "data"}, `key "berth.dev/team" has a prefix`},
		{map[string]string{"-team": "data"}, `key "-team" is not a label key`},
		{map[string]string{"team": "data science"}, `value "data science" of "team" is not a label value`},
	} {
		store := newMemStore()
		_, err := domain.NewService(store, testTypes).Create(context.Background(), domain.NewResource{Type: "runtime", Name: "a", Labels: tt.labels})
		if fieldOf(t, err) != "labels" || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("create with labels %v: %v, want a labels error saying %q", tt.labels, err, tt.msg)
		}
		if len(store.created) != 0 {
			t.Error("a resource with bad labels reached the store")
		}
	}
}

func TestLabelMergesAndRemoves(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	svc := domain.NewService(store, testTypes)
	r, err := svc.Create(ctx, domain.NewResource{Type: "runtime", Name: "a", Labels: map[string]string{"team": "data", "tier": "dev"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err = svc.Label(ctx, r.ID, map[string]string{"tier": "prod", "env": "eu"}, []string{"team"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"tier": "prod", "env": "eu"}; !maps.Equal(r.Labels, want) {
		t.Errorf("labels = %v, want %v", r.Labels, want)
	}

	before := maps.Clone(r.Labels)
	for _, tt := range []struct {
		name  string
		set   map[string]string
		unset []string
		msg   string
	}{
		{"remove a label it lacks", nil, []string{"team"}, `the resource has no label "team" (its labels: env, tier)`},
		{"set and remove", map[string]string{"env": "us"}, []string{"env"}, `"env" is both set and removed`},
		{"bad key", map[string]string{"a/b": "c"}, nil, `key "a/b" has a prefix`},
		{"bad value", map[string]string{"env": "eu west"}, nil, `is not a label value`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Label(ctx, r.ID, tt.set, tt.unset)
			if fieldOf(t, err) != "labels" || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want a labels error saying %q", err, tt.msg)
			}
			if got := store.rows[r.ID].Labels; !maps.Equal(got, before) {
				t.Errorf("a refused label change changed the labels to %v", got)
			}
		})
	}
	if _, err := svc.Label(ctx, "missing", map[string]string{"a": "b"}, nil); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("label of a missing resource: %v, want ErrNotFound", err)
	}
}

func TestControlsNeedAnID(t *testing.T) {
	svc := domain.NewService(newMemStore(), testTypes)
	ctx := context.Background()
	for name, control := range map[string]func(context.Context, string) (domain.Resource, error){
		"pause": svc.Pause, "resume": svc.Resume, "hibernate": svc.Hibernate, "wake": svc.Wake, "retry": svc.Retry,
	} {
		if _, err := control(ctx, "  "); fieldOf(t, err) != "id" {
			t.Errorf("%s without an id: %v, want an id error", name, err)
		}
		if _, err := control(ctx, "missing"); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%s of a missing resource: %v, want ErrNotFound", name, err)
		}
	}
}

func TestListAndGetValidateInput(t *testing.T) {
	svc := domain.NewService(newMemStore(), testTypes)
	ctx := context.Background()
	if _, err := svc.List(ctx, domain.ListFilter{Type: "vm"}); fieldOf(t, err) != "type" {
		t.Errorf("list with a bad type: %v", err)
	}
	_, err := svc.List(ctx, domain.ListFilter{Status: "done"})
	if fieldOf(t, err) != "status" || !strings.Contains(err.Error(), "pending, provisioning, ready, unhealthy, error, deleting") {
		t.Errorf("list with a bad status: %v", err)
	}
	if _, err := svc.Get(ctx, " "); fieldOf(t, err) != "id" {
		t.Errorf("get without id: %v", err)
	}
	if _, err := svc.Get(ctx, "missing"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("get of a missing resource: %v, want ErrNotFound", err)
	}
}

func TestWaitPollsOnTheClockUntilDone(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	svc := domain.NewService(store, testTypes)
	r, err := svc.Create(ctx, domain.NewResource{Type: "runtime", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewClock(time.Now())
	type result struct {
		r   domain.Resource
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := svc.Wait(ctx, clk, r.ID, func(r domain.Resource, err error) (bool, error) {
			return err == nil && r.Status == domain.StatusReady, err
		}, time.Second)
		done <- result{got, err}
	}()

	// The first read saw pending; the waiter now waits on the clock.
	if err := clk.WaitAdvance(time.Second, 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	// The second read still sees pending; make the resource ready before the third.
	if err := clk.WaitAdvance(0, 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	row := store.rows[r.ID]
	row.Status = domain.StatusReady
	store.rows[r.ID] = row
	if err := clk.WaitAdvance(time.Second, 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.Status != domain.StatusReady {
		t.Fatalf("Wait = %+v, %v; want the ready resource", res.r, res.err)
	}
	if store.gets != 3 {
		t.Errorf("Wait read the resource %d times, want 3", store.gets)
	}
}

func TestWaitStopsOnErrorAndContext(t *testing.T) {
	store := newMemStore()
	svc := domain.NewService(store, testTypes)
	clk := testclock.NewClock(time.Now())

	// until sees the failed read (the row is gone) and decides.
	_, err := svc.Wait(context.Background(), clk, "gone", func(_ domain.Resource, err error) (bool, error) {
		return errors.Is(err, domain.ErrNotFound), nil
	}, time.Second)
	if err != nil {
		t.Errorf("Wait for a deleted row: %v", err)
	}

	boom := errors.New("resource failed")
	_, err = svc.Wait(context.Background(), clk, "gone", func(domain.Resource, error) (bool, error) {
		return false, boom
	}, time.Second)
	if !errors.Is(err, boom) {
		t.Errorf("Wait = %v, want until's error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = svc.Wait(ctx, clk, "gone", func(domain.Resource, error) (bool, error) { return false, nil }, time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context = %v, want context.Canceled", err)
	}

	if _, err := svc.Wait(context.Background(), clk, "x", nil, 0); err == nil {
		t.Error("Wait with a zero interval should fail")
	}
}

func TestLiveAgentIDs(t *testing.T) {
	listed := []domain.Agent{{ID: "c", Live: true}, {ID: "a", Live: false}, {ID: "b", Live: true}, {ID: "self", Live: false}}
	if got, want := domain.LiveAgentIDs(listed, "self"), []string{"b", "c", "self"}; !slices.Equal(got, want) {
		t.Errorf("LiveAgentIDs = %v, want %v: live ones and self, sorted", got, want)
	}
	if got := domain.LiveAgentIDs(nil, "self"); !slices.Equal(got, []string{"self"}) {
		t.Errorf("LiveAgentIDs of none = %v, want self alone", got)
	}
}

func TestListsNameEveryStatus(t *testing.T) {
	if got, want := domain.StatusNames(), "pending, provisioning, ready, unhealthy, error, deleting, hibernating, hibernated"; got != want {
		t.Errorf("StatusNames() = %q, want %q", got, want)
	}
}
