package domain

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/juju/clock"
	jujuerrors "github.com/juju/errors"
)

// EventFeed is the part of EventLog that watches and waits tail: every resource's events in
// the order they were recorded, and wake-ups when there are new ones.
type EventFeed interface {
	LatestEventSeq(ctx context.Context) (int64, error)
	EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error)
	ListenEvents(ctx context.Context) (ChangeListener, error)
}

// ChangeFeed is the part of ChangeLog that watches and waits tail.
type ChangeFeed interface {
	LatestChangeSeq(ctx context.Context) (int64, error)
	ChangesAfter(ctx context.Context, after int64, limit int) ([]Change, error)
	ListenChanges(ctx context.Context) (ChangeListener, error)
}

// Feed is what watches and waits follow: the event feed, which records every change of a
// resource's status (its creation and removal included) and every control, and the change
// log, which records every change of what is wanted of it (args, labels, a delete request)
// that records no event. Every backend keeps both.
type Feed interface {
	EventFeed
	ChangeFeed
}

// FeedPosition is a place in the feed: the newest event and change-log entry read.
type FeedPosition struct {
	Event, Change int64
}

// LatestFeedPosition returns the feed's newest position: taken before a read of resources,
// it is where to follow their changes from.
func LatestFeedPosition(ctx context.Context, feed Feed) (FeedPosition, error) {
	event, err := feed.LatestEventSeq(ctx)
	if err != nil {
		return FeedPosition{}, err
	}
	change, err := feed.LatestChangeSeq(ctx)
	if err != nil {
		return FeedPosition{}, err
	}
	return FeedPosition{Event: event, Change: change}, nil
}

// Reading the feed: how many entries one read takes, how many numbers below the start are
// watched for transactions that commit late, how far below the newest number read a missing
// one can be and still be waited for (a jump of the sequence makes no million gaps), and how
// long a missing number is waited for before it is taken as rolled back (as the agent's
// watcher does).
const (
	feedPage       = 500
	feedStartGaps  = 100
	feedMaxGaps    = 1000
	feedGapTimeout = time.Minute
)

// FollowFeed calls fn with the ids of the resources that have events or change-log entries
// after from, as they are recorded, until fn says it is done, fn or a read fails, or ctx
// ends (the error then wraps ctx.Err()). It reads the feed when a listener (ListenEvents,
// ListenChanges) wakes it and, since wake-ups are hints that may be lost, every recheck on
// clk, woken or not; fn is called on every such recheck, with the ids found (maybe none)
// and recheck true, so that a caller can look again at what it waits for. A listener that
// cannot be opened or breaks is opened again a recheck later; the rechecks carry on
// meanwhile.
func FollowFeed(ctx context.Context, feed Feed, clk clock.Clock, from FeedPosition, recheck time.Duration,
	fn func(ids []string, recheck bool) (done bool, err error)) error {
	if recheck <= 0 {
		return fmt.Errorf("follow the event feed: the recheck interval must be positive, got %v", recheck)
	}
	tails := []*feedTail{
		{what: "the event feed", read: func(ctx context.Context, after int64) ([]feedEntry, error) {
			events, err := feed.EventsAfter(ctx, after, feedPage)
			out := make([]feedEntry, len(events))
			for i, e := range events {
				out[i] = feedEntry{seq: e.Seq, id: e.ResourceID}
			}
			return out, err
		}},
		{what: "the change log", read: func(ctx context.Context, after int64) ([]feedEntry, error) {
			changes, err := feed.ChangesAfter(ctx, after, feedPage)
			out := make([]feedEntry, len(changes))
			for i, c := range changes {
				out[i] = feedEntry{seq: c.Seq, id: c.ResourceID}
			}
			return out, err
		}},
	}
	for i, latest := range []int64{from.Event, from.Change} {
		if err := tails[i].start(ctx, latest, clk.Now()); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	hints := make(chan struct{}, 1)
	var listeners sync.WaitGroup
	for _, listen := range []func(context.Context) (ChangeListener, error){feed.ListenEvents, feed.ListenChanges} {
		listeners.Go(func() { listenFeed(ctx, listen, clk, recheck, hints) })
	}
	defer func() {
		cancel()
		listeners.Wait()
	}()
	// The rechecks keep their own beat: a wake-up does not put the next one off, so a feed
	// that never goes quiet is still rechecked every recheck.
	timer := clk.NewTimer(recheck)
	defer timer.Stop()
	for {
		rechecked := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-hints:
		case <-timer.Chan():
			rechecked = true
			timer.Reset(recheck)
		}
		var ids []string
		found := map[string]bool{}
		for _, t := range tails {
			tailIDs, err := t.next(ctx, clk.Now())
			if err != nil {
				return err
			}
			for _, id := range tailIDs {
				if !found[id] {
					found[id] = true
					ids = append(ids, id)
				}
			}
		}
		if len(ids) > 0 || rechecked {
			if done, err := fn(ids, rechecked); err != nil || done {
				return err
			}
		}
	}
}

// feedEntry is an entry of the event feed or the change log.
type feedEntry struct {
	seq int64
	id  string
}

// feedTail follows one sequence-numbered feed. A number is taken when a transaction writes
// and is seen when it commits, so a number below the newest one read may still show up: the
// tail reads again from the lowest missing number until it does, or feedGapTimeout passes (a
// rolled-back transaction burns its number for good).
type feedTail struct {
	what  string
	read  func(ctx context.Context, after int64) ([]feedEntry, error) // a page after after, in order
	after int64                                                       // every number up to after was read or given up
	seen  map[int64]bool                                              // the numbers above after that were read
	gaps  map[int64]time.Time                                         // the numbers above after missing, and since when
}

// start places the tail at latest, the feed's newest number when the caller read what it
// follows. The numbers missing just below it are gaps: their transactions may commit later.
func (t *feedTail) start(ctx context.Context, latest int64, now time.Time) error {
	t.after = max(0, latest-feedStartGaps)
	t.seen = map[int64]bool{}
	t.gaps = map[int64]time.Time{}
	entries, err := t.read(ctx, t.after)
	if err != nil {
		return fmt.Errorf("read %s after %d: %w", t.what, t.after, err)
	}
	for _, e := range entries {
		if e.seq <= latest {
			t.seen[e.seq] = true
		}
	}
	t.settle(latest, now)
	return nil
}

// next reads the feed from the tail and returns the resource ids of the entries not read
// before, in order.
func (t *feedTail) next(ctx context.Context, now time.Time) ([]string, error) {
	var ids []string
	high := t.after
	for from := t.after; ; {
		entries, err := t.read(ctx, from)
		if err != nil {
			return nil, fmt.Errorf("read %s after %d: %w", t.what, from, err)
		}
		for _, e := range entries {
			high = max(high, e.seq)
			if !t.seen[e.seq] {
				t.seen[e.seq] = true
				ids = append(ids, e.id)
			}
		}
		if len(entries) < feedPage {
			break
		}
		from = entries[len(entries)-1].seq
	}
	t.settle(high, now)
	return ids, nil
}

// settle notes the numbers missing up to high as gaps, and moves the tail up to the lowest
// gap younger than feedGapTimeout and at most feedMaxGaps below high.
func (t *feedTail) settle(high int64, now time.Time) {
	if floor := high - feedMaxGaps; t.after < floor {
		for seq := range t.seen {
			if seq <= floor {
				delete(t.seen, seq)
			}
		}
		for seq := range t.gaps {
			if seq <= floor {
				delete(t.gaps, seq)
			}
		}
		t.after = floor
	}
	for seq := t.after + 1; seq <= high; seq++ {
		if _, known := t.gaps[seq]; !known && !t.seen[seq] {
			t.gaps[seq] = now
		}
	}
	for seq := t.after + 1; seq <= high; seq++ {
		if !t.seen[seq] && now.Sub(t.gaps[seq]) < feedGapTimeout {
			return
		}
		delete(t.seen, seq)
		delete(t.gaps, seq)
		t.after = seq
	}
}

// listenFeed sends a hint on hints for every wake-up of the listener listen opens, and one
// each time one opens (entries may have been recorded while none was open), until ctx ends.
// Hints that are not taken yet coalesce.
func listenFeed(ctx context.Context, listen func(context.Context) (ChangeListener, error), clk clock.Clock, retry time.Duration, hints chan<- struct{}) {
	hint := func() {
		select {
		case hints <- struct{}{}:
		default:
		}
	}
	for {
		if listener, err := listen(ctx); err == nil {
			hint()
			for listener.Wait(ctx) == nil {
				hint()
			}
			_ = listener.Close() // a listener that broke: its close error says nothing more
		}
		if ctx.Err() != nil {
			return
		}
		timer := clk.NewTimer(retry)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.Chan():
		}
	}
}

// Matches reports whether r is one of the resources f lists (its Limit aside).
func (f ListFilter) Matches(r Resource) bool {
	return (f.Owner == "" || r.Owner == f.Owner) &&
		(f.Type == "" || r.Type == f.Type) &&
		(f.Provisioner == "" || r.Provisioner == f.Provisioner) &&
		(f.Status == "" || r.Status == f.Status) &&
		r.MatchesSelector(f.Selector)
}

// ResourceChange is a change a watch reports: the resource as read again after an entry of
// it in the feed, or, when Removed, as it was last seen before its row was removed.
type ResourceChange struct {
	Resource Resource
	Removed  bool
}

// WatchResources calls initial with the resources matching f as they are now, then changed
// with every change of a resource that matches f, or matched it when last seen (so that one
// leaving the filter is seen to leave it), as it happens, until initial or changed fails or
// ctx ends (the error then wraps ctx.Err()). f.Limit bounds the first listing only. Changes
// come from the feed (FollowFeed, rechecked every recheck on clk), not from reading the
// resources: a resource is read again when the feed has an entry of it, and reported when it
// reads differently from when it was last reported. The store must keep the feed (every
// backend does).
func (s *Service) WatchResources(ctx context.Context, clk clock.Clock, f ListFilter, recheck time.Duration,
	initial func([]Resource) error, changed func(ResourceChange) error) error {
	feed, err := s.feed()
	if err != nil {
		return err
	}
	from, err := LatestFeedPosition(ctx, feed)
	if err != nil {
		return fmt.Errorf("watch resources: %w", err)
	}
	rs, err := s.List(ctx, f)
	if err != nil {
		return err
	}
	seen := make(map[string]Resource, len(rs))
	for _, r := range rs {
		seen[r.ID] = r
	}
	if err := initial(rs); err != nil {
		return err
	}
	w := &resourceWatch{store: s.store, seen: seen, match: f.Matches, changed: changed}
	err = FollowFeed(ctx, feed, clk, from, recheck, func(ids []string, _ bool) (bool, error) {
		return false, w.apply(ctx, ids)
	})
	return watchEnded("watch resources", ctx, err)
}

// WatchResource is WatchResources for the one resource with id: initial is called with it as
// it is now, and the watch ends (nil) once its removal is reported.
func (s *Service) WatchResource(ctx context.Context, clk clock.Clock, id string, recheck time.Duration,
	initial func(Resource) error, changed func(ResourceChange) error) error {
	id, err := checkID(id)
	if err != nil {
		return err
	}
	feed, err := s.feed()
	if err != nil {
		return err
	}
	from, err := LatestFeedPosition(ctx, feed)
	if err != nil {
		return fmt.Errorf("watch resource %s: %w", id, err)
	}
	r, err := s.store.GetResource(ctx, id)
	if err != nil {
		return err
	}
	if err := initial(r); err != nil {
		return err
	}
	w := &resourceWatch{
		store:   s.store,
		seen:    map[string]Resource{r.ID: r},
		match:   func(other Resource) bool { return other.ID == r.ID },
		changed: changed,
	}
	err = FollowFeed(ctx, feed, clk, from, recheck, func(ids []string, _ bool) (bool, error) {
		if err := w.apply(ctx, ids); err != nil {
			return false, err
		}
		_, present := w.seen[r.ID]
		return !present, nil
	})
	return watchEnded("watch resource "+id, ctx, err)
}

// resourceWatch turns batches of events into the changes of the resources a watch follows.
type resourceWatch struct {
	store   ResourceStore
	seen    map[string]Resource // the resources followed, as last reported
	match   func(Resource) bool
	changed func(ResourceChange) error
}

// apply reads again each resource of ids (those with new entries in the feed) and reports
// those that changed.
func (w *resourceWatch) apply(ctx context.Context, ids []string) error {
	for _, id := range ids {
		last, followed := w.seen[id]
		r, err := w.store.GetResource(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			if !followed {
				continue
			}
			delete(w.seen, id)
			if err := w.changed(ResourceChange{Resource: last, Removed: true}); err != nil {
				return err
			}
		case err != nil:
			return err
		case w.match(r):
			w.seen[id] = r
			if followed && reflect.DeepEqual(last, r) {
				continue
			}
			if err := w.changed(ResourceChange{Resource: r}); err != nil {
				return err
			}
		case followed:
			delete(w.seen, id)
			if err := w.changed(ResourceChange{Resource: r}); err != nil {
				return err
			}
		}
	}
	return nil
}

// feed returns the store's feed, or a NotSupported error when it keeps none.
func (s *Service) feed() (Feed, error) {
	feed, ok := s.store.(Feed)
	if !ok {
		return nil, jujuerrors.NewNotSupported(nil, "this store keeps no event feed and change log: resources cannot be watched")
	}
	return feed, nil
}

// watchEnded words the error a watch ended with.
func watchEnded(what string, ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	return err
}

// agentLister is the part of AgentStore a wait reads to tell whether any agent will act.
type agentLister interface {
	ListAgents(ctx context.Context, ttl time.Duration) ([]Agent, error)
}

// LiveAgents returns the registered agents whose last heartbeat is younger than ttl (see
// AgentStore.ListAgents), so that a wait can say when no agent will move what it waits for;
// a NotSupported error when the store keeps no agents table.
func (s *Service) LiveAgents(ctx context.Context, ttl time.Duration) ([]Agent, error) {
	lister, ok := s.store.(agentLister)
	if !ok {
		return nil, jujuerrors.NewNotSupported(nil, "this store keeps no agents table")
	}
	agents, err := lister.ListAgents(ctx, ttl)
	if err != nil {
		return nil, err
	}
	var live []Agent
	for _, a := range agents {
		if a.Live {
			live = append(live, a)
		}
	}
	return live, nil
}
