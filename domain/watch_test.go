package domain_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
)

// feedStore is a ResourceStore with a feed, safe for the waiter's goroutines: put and remove
// record an event and wake the listeners, as the stores' triggers do, and change records a
// change-log entry.
type feedStore struct {
	*memStore
	mu        sync.Mutex
	events    seqLog
	changes   seqLog
	listenErr error         // ListenEvents and ListenChanges fail with it while set
	reads     chan struct{} // a value for every read of the event feed
}

// seqLog is a sequence-numbered log with its listeners.
type seqLog struct {
	entries   []domain.Event
	listeners []chan struct{}
	afters    []int64 // the after of every read
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

// change stores r and records a change-log entry of it.
func (f *feedStore) change(r domain.Resource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows[r.ID] = r
	f.append(&f.changes, domain.Event{Seq: int64(len(f.changes.entries) + 1), ResourceID: r.ID})
}

func (f *feedStore) remove(id string) {
	f.mu.Lock()
	r := f.rows[id]
	delete(f.rows, id)
	f.mu.Unlock()
	f.record(id, r.Status, "removed")
}

func (f *feedStore) record(id string, status domain.Status, msg string) {
	f.recordSeq(0, id, status, msg)
}

// recordSeq records an event numbered seq (0: the next number), as a transaction that took
// its number earlier and commits only now does.
func (f *feedStore) recordSeq(seq int64, id string, status domain.Status, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq == 0 {
		seq = int64(len(f.events.entries) + 1)
		if n := len(f.events.entries); n > 0 {
			seq = max(seq, f.events.entries[n-1].Seq+1)
		}
	}
	f.append(&f.events, domain.Event{Seq: seq, ResourceID: id, Kind: domain.EventStatus, Status: status, Message: msg})
}

func (f *feedStore) append(l *seqLog, e domain.Event) {
	l.entries = append(l.entries, e)
	slices.SortFunc(l.entries, func(a, b domain.Event) int { return int(a.Seq - b.Seq) })
	for _, w := range l.listeners {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (f *feedStore) after(l *seqLog, after int64, limit int) []domain.Event {
	l.afters = append(l.afters, after)
	var out []domain.Event
	for _, e := range l.entries {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out
}

func (f *feedStore) listen(l *seqLog) (domain.ChangeListener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listenErr != nil {
		return nil, f.listenErr
	}
	w := make(chan struct{}, 1)
	l.listeners = append(l.listeners, w)
	return chanListener(w), nil
}

func (f *feedStore) latest(l *seqLog) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(l.entries) == 0 {
		return 0
	}
	return l.entries[len(l.entries)-1].Seq
}

func (f *feedStore) LatestEventSeq(context.Context) (int64, error) { return f.latest(&f.events), nil }

func (f *feedStore) EventsAfter(_ context.Context, after int64, limit int) ([]domain.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads <- struct{}{}
	return f.after(&f.events, after, limit), nil
}

func (f *feedStore) ListenEvents(context.Context) (domain.ChangeListener, error) {
	return f.listen(&f.events)
}

func (f *feedStore) LatestChangeSeq(context.Context) (int64, error) { return f.latest(&f.changes), nil }

func (f *feedStore) ChangesAfter(_ context.Context, after int64, limit int) ([]domain.Change, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []domain.Change
	for _, e := range f.after(&f.changes, after, limit) {
		out = append(out, domain.Change{Seq: e.Seq, ResourceID: e.ResourceID})
	}
	return out, nil
}

func (f *feedStore) ListenChanges(context.Context) (domain.ChangeListener, error) {
	return f.listen(&f.changes)
}

// eventReadsFrom returns the after of every read of the event feed so far.
func (f *feedStore) eventReadsFrom() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events.afters)
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
	case <-time.After(testkit.LongWait):
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
	case <-time.After(testkit.LongWait):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}

// Wait returns on the event of the resource, without the clock moving, and reads the
// resource only for events of its own.
func TestWaitWakesOnTheEventFeed(t *testing.T) {
	store := newFeedStore()
	svc := domain.NewService(store, testTypes)
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

// Without listeners (they cannot be opened) Wait still reads the feed at every recheck on
// the clock, and listening is tried again.
func TestWaitRechecksWithoutListeners(t *testing.T) {
	store := newFeedStore()
	store.listenErr = errors.New("no notifications here")
	svc := domain.NewService(store, testTypes)
	r, _ := store.CreateResource(context.Background(), domain.NewResource{Type: "runtime", Name: "a"})
	clk := testclock.NewClock(time.Now())
	done := startWait(svc, clk, r.ID)
	store.awaitRead(t)
	r.Status = domain.StatusReady
	store.put(r)
	// The recheck, and the next attempt to open each listener.
	if err := clk.WaitAdvance(time.Minute, testkit.LongWait, 3); err != nil {
		t.Fatal(err)
	}
	if res := awaitResult(t, done); res.err != nil || res.r.Status != domain.StatusReady {
		t.Fatalf("Wait = %+v, %v; want the ready resource", res.r, res.err)
	}
}

// feedCall is one call of FollowFeed's fn.
type feedCall struct {
	ids     []string
	recheck bool
}

// followFeed runs FollowFeed until ctx ends. next returns its next call of fn, failing t when
// none comes; errc has what FollowFeed returned.
func followFeed(ctx context.Context, t *testing.T, store *feedStore, clk *testclock.Clock, from domain.FeedPosition,
	recheck time.Duration) (next func() feedCall, errc <-chan error) {
	calls := make(chan feedCall, 10)
	done := make(chan error, 1)
	go func() {
		done <- domain.FollowFeed(ctx, store, clk, from, recheck, func(ids []string, recheck bool) (bool, error) {
			calls <- feedCall{ids, recheck}
			return false, nil
		})
	}()
	return func() feedCall {
		t.Helper()
		select {
		case c := <-calls:
			return c
		case <-time.After(testkit.LongWait):
			t.Fatal("FollowFeed reported nothing")
			return feedCall{}
		}
	}, done
}

// A number skipped in the feed is read once its transaction commits; one that never shows
// up (a rollback) is waited for feedGapTimeout, then the feed is read past it.
func TestFollowFeedReadsLateCommitsAndGivesUpOnRollbacks(t *testing.T) {
	store := newFeedStore()
	store.recordSeq(1, "a", domain.StatusPending, "created")
	clk := testclock.NewClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next, errc := followFeed(ctx, t, store, clk, domain.FeedPosition{Event: 1}, 2*time.Minute)
	store.recordSeq(3, "c", domain.StatusPending, "created")
	if c := next(); !slices.Equal(c.ids, []string{"c"}) {
		t.Fatalf("got %+v, want c", c)
	}
	store.recordSeq(2, "b", domain.StatusPending, "created") // committed after 3
	if c := next(); !slices.Equal(c.ids, []string{"b"}) {
		t.Fatalf("got %+v, want b, committed late", c)
	}
	store.recordSeq(5, "e", domain.StatusPending, "created") // 4 rolled back
	if c := next(); !slices.Equal(c.ids, []string{"e"}) {
		t.Fatalf("got %+v, want e", c)
	}
	if err := clk.WaitAdvance(2*time.Minute, testkit.LongWait, 1); err != nil {
		t.Fatal(err)
	}
	if c := next(); !c.recheck || len(c.ids) != 0 {
		t.Fatalf("got %+v, want a recheck finding nothing", c)
	}
	store.recordSeq(6, "f", domain.StatusPending, "created")
	if c := next(); !slices.Equal(c.ids, []string{"f"}) {
		t.Fatalf("got %+v, want f", c)
	}
	reads := store.eventReadsFrom()
	if i := slices.Index(reads, 3); i < 0 || slices.Contains(reads[:i], 5) {
		t.Errorf("the feed was not read after 3 once 2 showed up, before 5 (reads after: %v)", reads)
	}
	if i := slices.Index(reads, 5); i < 0 || slices.Contains(reads[i:], 3) {
		t.Errorf("the feed was not read after 5 once the gap at 4 was given up, or read from 3 again (reads after: %v)", reads)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("FollowFeed after cancel = %v, want context.Canceled", err)
	}
}

// A feed that keeps waking FollowFeed does not put its rechecks off: they come every
// recheck on the clock, counted from the last one, not from the last wake-up.
func TestFollowFeedRechecksOnItsOwnBeatWhileWoken(t *testing.T) {
	store := newFeedStore()
	clk := testclock.NewClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next, _ := followFeed(ctx, t, store, clk, domain.FeedPosition{}, time.Minute)
	for i, id := range []string{"a", "b"} {
		if err := clk.WaitAdvance(30*time.Second, testkit.LongWait, 1); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if c := next(); !c.recheck {
				t.Fatalf("got %+v, want the recheck a minute after the start", c)
			}
		}
		store.record(id, domain.StatusPending, "created")
		for c := next(); !slices.Contains(c.ids, id); c = next() {
			if c.recheck {
				t.Fatalf("got %+v before a minute passed, want %s", c, id)
			}
		}
	}
}

// A jump of the sequence numbers is no gap to wait for: the feed is read on from near the
// top of the jump.
func TestFollowFeedReadsOnAfterAJump(t *testing.T) {
	store := newFeedStore()
	clk := testclock.NewClock(time.Now())
	calls := make(chan []string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = domain.FollowFeed(ctx, store, clk, domain.FeedPosition{}, time.Minute, func(ids []string, _ bool) (bool, error) {
			calls <- ids
			return false, nil
		})
	}()
	var got []string
	await := func(n int) {
		t.Helper()
		for len(got) < n {
			select {
			case ids := <-calls:
				got = append(got, ids...)
			case <-time.After(testkit.LongWait):
				t.Fatalf("FollowFeed reported %v, want %d ids", got, n)
			}
		}
	}
	store.recordSeq(1_000_000, "far", domain.StatusPending, "created")
	await(1)
	store.recordSeq(1_000_001, "next", domain.StatusPending, "created")
	await(2)
	if reads := store.eventReadsFrom(); reads[len(reads)-1] < 1_000_000-1000 {
		t.Errorf("the feed was last read after %d, want near the jump's top", reads[len(reads)-1])
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
	case <-time.After(testkit.LongWait):
		t.Fatal("no change reported")
		return domain.ResourceChange{}
	}
}

// A watch of a filtered list reports the resources matching it, then each change of one:
// new ones, changed ones, one leaving the filter (once) and a removed one as last seen;
// changes of other resources and events that change nothing are not reported. Changes of
// what is wanted come from the change log.
func TestWatchResourcesReportsTheChangesOfMatchingResources(t *testing.T) {
	store := newFeedStore()
	svc := domain.NewService(store, testTypes)
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
	a.Args = map[string]any{"slots": 3}
	store.change(a) // the change log has it; the event feed does not
	if c := w.next(t); c.Resource.ID != a.ID || c.Resource.Args["slots"] != 3 {
		t.Fatalf("change = %+v, want a's new args", c)
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
	svc := domain.NewService(store, testTypes)
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
	case <-time.After(testkit.LongWait):
		t.Fatal("WatchResource did not end after the removal")
	}
	if err := svc.WatchResource(context.Background(), testclock.NewClock(time.Now()), a.ID, time.Minute,
		func(domain.Resource) error { return nil }, w.onChange); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("watching a missing resource = %v, want ErrNotFound", err)
	}
}
