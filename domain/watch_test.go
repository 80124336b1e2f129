package domain_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
)

const testLimit = 10 * time.Second // how long a test waits for the code under test to get somewhere

// feedStore is a ResourceStore with an event feed, safe for the waiter's goroutines: put and
// remove record an event and wake the listeners, as the stores' triggers do.
type feedStore struct {
	*memStore
	mu        sync.Mutex
	events    []domain.Event
	listeners []chan struct{}
	listenErr error         // ListenEvents fails with it while set
	lossy     bool          // wake-ups are lost
	reads     chan struct{} // a value for every read of the feed
}

func newFeedStore() *feedStore {
	return &feedStore{memStore: newMemStore(), reads: make(chan struct{}, 1000)}
}

func (f *feedStore) GetResource(ctx context.Context, id string) (domain.Resource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.memStore.GetResource(ctx, id)
}

func (f *feedStore) ListResources(ctx context.Context, lf domain.ListFilter) ([]domain.Resource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []domain.Resource
	for _, r := range f.rows {
		if lf.Matches(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *feedStore) gotten() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

// put stores r and records an event of it.
func (f *feedStore) put(r domain.Resource) {
	f.mu.Lock()
	f.rows[r.ID] = r
	f.mu.Unlock()
	f.record(r.ID, r.Status, "changed")
}

func (f *feedStore) remove(id string) {
	f.mu.Lock()
	r := f.rows[id]
	delete(f.rows, id)
	f.mu.Unlock()
	f.record(id, r.Status, "removed")
}

func (f *feedStore) record(id string, status domain.Status, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, domain.Event{Seq: int64(len(f.events) + 1), ResourceID: id, Kind: domain.EventStatus, Status: status, Message: msg})
	if f.lossy {
		return
	}
	for _, l := range f.listeners {
		select {
		case l <- struct{}{}:
		default:
		}
	}
}

func (f *feedStore) LatestEventSeq(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.events)), nil
}

func (f *feedStore) EventsAfter(_ context.Context, after int64, limit int) ([]domain.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads <- struct{}{}
	out := append([]domain.Event(nil), f.events[min(int(after), len(f.events)):]...)
	return out[:min(limit, len(out))], nil
}

func (f *feedStore) ListenEvents(context.Context) (domain.ChangeListener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listenErr != nil {
		return nil, f.listenErr
	}
	l := make(chan struct{}, 1)
	f.listeners = append(f.listeners, l)
	return chanListener(l), nil
}

type chanListener chan struct{}

func (l chanListener) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-l:
		return nil
	}
}

func (l chanListener) Close() error { return nil }

// awaitRead waits for the next read of the feed.
func (f *feedStore) awaitRead(t *testing.T) {
	t.Helper()
	select {
	case <-f.reads:
	case <-time.After(testLimit):
		t.Fatal("the feed was not read")
	}
}

type waitResult struct {
	r   domain.Resource
	err error
}

func startWait(svc *domain.Service, clk *testclock.Clock, id string) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		r, err := svc.Wait(context.Background(), clk, id, func(r domain.Resource, err error) (bool, error) {
			return err == nil && r.Status == domain.StatusReady, err
		}, time.Minute)
		done <- waitResult{r, err}
	}()
	return done
}

func awaitResult(t *testing.T, done <-chan waitResult) waitResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(testLimit):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}

// Wait returns on the event of the resource, without the clock moving, and reads the
// resource only for events of its own.
func TestWaitWakesOnTheEventFeed(t *testing.T) {
	store := newFeedStore()
	svc := domain.NewService(store)
	r, _ := store.CreateResource(context.Background(), domain.NewResource{Type: "runtime", Name: "a"})
	other, _ := store.CreateResource(context.Background(), domain.NewResource{Type: "runtime", Name: "b"})
	clk := testclock.NewClock(time.Now())
	done := startWait(svc, clk, r.ID)
	store.awaitRead(t) // the read a new listener asks for

	other.Status = domain.StatusReady
	store.put(other)
	store.awaitRead(t)
	r.Status = domain.StatusReady
	store.put(r)
	res := awaitResult(t, done)
	if res.err != nil || res.r.Status != domain.StatusReady {
		t.Fatalf("Wait = %+v, %v; want the ready resource", res.r, res.err)
	}
	if got := store.gotten(); got != 2 {
		t.Errorf("Wait read the resource %d times, want 2: at once and after its event", got)
	}
}

// A lost wake-up only delays Wait until the recheck, on the clock.
func TestWaitRechecksWhenAWakeUpIsLost(t *testing.T) {
	store := newFeedStore()
	store.lossy = true
	svc := domain.NewService(store)
	r, _ := store.CreateResource(context.Background(), domain.NewResource{Type: "runtime", Name: "a"})
	clk := testclock.NewClock(time.Now())
	done := startWait(svc, clk, r.ID)
	store.awaitRead(t)
	r.Status = domain.StatusReady
	store.put(r)
	if err := clk.WaitAdvance(time.Minute, testLimit, 1); err != nil {
		t.Fatal(err)
	}
	if res := awaitResult(t, done); res.err != nil || res.r.Status != domain.StatusReady {
		t.Fatalf("Wait = %+v, %v; want the ready resource", res.r, res.err)
	}
}

// Without a listener (it cannot be opened) the feed is still read at every recheck, and
// listening is tried again.
func TestFollowFeedRechecksWithoutAListener(t *testing.T) {
	store := newFeedStore()
	store.listenErr = errors.New("no notifications here")
	store.record("x", domain.StatusReady, "changed")
	clk := testclock.NewClock(time.Now())
	got := make(chan []domain.Event, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- domain.FollowFeed(context.Background(), store, clk, 0, time.Minute, func(events []domain.Event, recheck bool) (bool, error) {
			if !recheck {
				return false, errors.New("called without a wake-up or a recheck")
			}
			got <- events
			return true, nil
		})
	}()
	// The recheck and the next attempt to listen.
	if err := clk.WaitAdvance(time.Minute, testLimit, 2); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if events := <-got; len(events) != 1 || events[0].ResourceID != "x" {
		t.Errorf("FollowFeed gave %+v, want the one event", events)
	}
}

type watched struct {
	initial chan []domain.Resource
	changes chan domain.ResourceChange
}

func newWatched() *watched {
	return &watched{initial: make(chan []domain.Resource, 1), changes: make(chan domain.ResourceChange, 100)}
}

func (w *watched) onInitial(rs []domain.Resource) error { w.initial <- rs; return nil }
func (w *watched) onChange(c domain.ResourceChange) error {
	w.changes <- c
	return nil
}

func (w *watched) next(t *testing.T) domain.ResourceChange {
	t.Helper()
	select {
	case c := <-w.changes:
		return c
	case <-time.After(testLimit):
		t.Fatal("no change reported")
		return domain.ResourceChange{}
	}
}

// A watch of a filtered list reports the resources matching it, then each change of one:
// new ones, changed ones, one leaving the filter (once) and a removed one as last seen;
// changes of other resources and events that change nothing are not reported.
func TestWatchResourcesReportsTheChangesOfMatchingResources(t *testing.T) {
	store := newFeedStore()
	svc := domain.NewService(store)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, _ := store.CreateResource(ctx, domain.NewResource{Type: "runtime", Name: "a", Owner: "acme"})
	other, _ := store.CreateResource(ctx, domain.NewResource{Type: "runtime", Name: "o", Owner: "else"})
	w := newWatched()
	errc := make(chan error, 1)
	clk := testclock.NewClock(time.Now())
	go func() {
		errc <- svc.WatchResources(ctx, clk, domain.ListFilter{Owner: "acme"}, time.Minute, w.onInitial, w.onChange)
	}()
	if rs := <-w.initial; len(rs) != 1 || rs[0].ID != a.ID {
		t.Fatalf("initial = %+v, want a alone", rs)
	}

	other.Status = domain.StatusReady
	store.put(other)
	store.record(a.ID, a.Status, "an event that changes nothing the resource shows")
	b := domain.Resource{ID: "id-b", Type: "runtime", Name: "b", Owner: "acme", Status: domain.StatusPending}
	store.put(b)
	if c := w.next(t); c.Resource.ID != b.ID || c.Removed {
		t.Fatalf("change = %+v, want the new resource b", c)
	}
	a.Status = domain.StatusReady
	store.put(a)
	if c := w.next(t); c.Resource.ID != a.ID || c.Resource.Status != domain.StatusReady {
		t.Fatalf("change = %+v, want a ready", c)
	}
	b.Owner = "moved"
	store.put(b)
	if c := w.next(t); c.Resource.ID != b.ID || c.Resource.Owner != "moved" || c.Removed {
		t.Fatalf("change = %+v, want b leaving the filter", c)
	}
	b.Status = domain.StatusError
	store.put(b) // no longer followed
	store.remove(a.ID)
	if c := w.next(t); c.Resource.ID != a.ID || !c.Removed || c.Resource.Status != domain.StatusReady {
		t.Fatalf("change = %+v, want a removed, as last seen", c)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("WatchResources after cancel = %v, want context.Canceled", err)
	}
	select {
	case c := <-w.changes:
		t.Errorf("unexpected change %+v", c)
	default:
	}
}

// A watch of one resource ends once it reports the resource's removal.
func TestWatchResourceEndsWithTheRemoval(t *testing.T) {
	store := newFeedStore()
	svc := domain.NewService(store)
	a, _ := store.CreateResource(context.Background(), domain.NewResource{Type: "runtime", Name: "a"})
	w := newWatched()
	errc := make(chan error, 1)
	go func() {
		errc <- svc.WatchResource(context.Background(), testclock.NewClock(time.Now()), a.ID, time.Minute,
			func(r domain.Resource) error { return w.onInitial([]domain.Resource{r}) }, w.onChange)
	}()
	<-w.initial
	a.Status = domain.StatusDeleting
	store.put(a)
	if c := w.next(t); c.Resource.Status != domain.StatusDeleting || c.Removed {
		t.Fatalf("change = %+v, want deleting", c)
	}
	store.remove(a.ID)
	if c := w.next(t); !c.Removed || c.Resource.ID != a.ID {
		t.Fatalf("change = %+v, want the removal", c)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("WatchResource = %v, want nil after the removal", err)
		}
	case <-time.After(testLimit):
		t.Fatal("WatchResource did not end after the removal")
	}
	if err := svc.WatchResource(context.Background(), testclock.NewClock(time.Now()), a.ID, time.Minute,
		func(domain.Resource) error { return nil }, w.onChange); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("watching a missing resource = %v, want ErrNotFound", err)
	}
}
