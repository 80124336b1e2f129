package domain

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/juju/clock"
)

// EventFeed is the part of EventLog that watches and waits tail: every resource's events in
// the order they were recorded, and wake-ups when there are new ones.
type EventFeed interface {
	LatestEventSeq(ctx context.Context) (int64, error)
	EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error)
	ListenEvents(ctx context.Context) (ChangeListener, error)
}

// feedPage is how many events one read of the feed takes.
const feedPage = 500

// FollowFeed calls fn with the events recorded after after, in Seq order, as they are
// recorded, until fn says it is done, fn or a read fails, or ctx ends (the error then wraps
// ctx.Err()). It reads the feed when ListenEvents wakes it and, since wake-ups are hints that
// may be lost, every recheck on clk without one; fn is called on every such recheck, with the
// events found (maybe none) and recheck true, so that a caller can look again at what it
// waits for. A listener that cannot be opened or breaks is opened again a recheck later; the
// rechecks carry on meanwhile.
func FollowFeed(ctx context.Context, feed EventFeed, clk clock.Clock, after int64, recheck time.Duration,
	fn func(events []Event, recheck bool) (done bool, err error)) error {
	if recheck <= 0 {
		return fmt.Errorf("follow the event feed: the recheck interval must be positive, got %v", recheck)
	}
	ctx, cancel := context.WithCancel(ctx)
	hints := make(chan struct{}, 1)
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		listenFeed(ctx, feed, clk, recheck, hints)
	}()
	defer func() {
		cancel()
		<-listening
	}()
	for {
		timer := clk.NewTimer(recheck)
		rechecked := false
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-hints:
			timer.Stop()
		case <-timer.Chan():
			rechecked = true
		}
		for {
			events, err := feed.EventsAfter(ctx, after, feedPage)
			if err != nil {
				return fmt.Errorf("read the event feed after event %d: %w", after, err)
			}
			if len(events) > 0 {
				after = events[len(events)-1].Seq
			}
			if len(events) > 0 || rechecked {
				if done, err := fn(events, rechecked); err != nil || done {
					return err
				}
			}
			if len(events) < feedPage {
				break
			}
			rechecked = false
		}
	}
}

// listenFeed sends a hint on hints for every wake-up of the feed's listener, and one each
// time a listener opens (events may have been recorded while none was open), until ctx
// ends. Hints that are not taken yet coalesce.
func listenFeed(ctx context.Context, feed EventFeed, clk clock.Clock, retry time.Duration, hints chan<- struct{}) {
	hint := func() {
		select {
		case hints <- struct{}{}:
		default:
		}
	}
	for {
		if listener, err := feed.ListenEvents(ctx); err == nil {
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

// ResourceChange is a change a watch reports: the resource as read again after an event of
// it, or, when Removed, as it was last seen before its row was removed.
type ResourceChange struct {
	Resource Resource
	Removed  bool
}

// WatchResources calls initial with the resources matching f as they are now, then changed
// with every change of a resource that matches f, or matched it when last seen (so that one
// leaving the filter is seen to leave it), as it happens, until initial or changed fails or
// ctx ends (the error then wraps ctx.Err()). f.Limit bounds the first listing only. Changes
// come from the event feed (FollowFeed, rechecked every recheck on clk), not from reading the
// resources: a resource is read again when an event of it is recorded, and reported when it
// reads differently from when it was last reported. The store must keep the event feed
// (every backend does).
func (s *Service) WatchResources(ctx context.Context, clk clock.Clock, f ListFilter, recheck time.Duration,
	initial func([]Resource) error, changed func(ResourceChange) error) error {
	feed, err := s.eventFeed()
	if err != nil {
		return err
	}
	after, err := feed.LatestEventSeq(ctx)
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
	err = FollowFeed(ctx, feed, clk, after, recheck, func(events []Event, _ bool) (bool, error) {
		return false, w.apply(ctx, events)
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
	feed, err := s.eventFeed()
	if err != nil {
		return err
	}
	after, err := feed.LatestEventSeq(ctx)
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
	err = FollowFeed(ctx, feed, clk, after, recheck, func(events []Event, _ bool) (bool, error) {
		if err := w.apply(ctx, events); err != nil {
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

// apply reads again each resource the events are about, once per batch in the order of its
// first event, and reports those that changed.
func (w *resourceWatch) apply(ctx context.Context, events []Event) error {
	done := make(map[string]bool, len(events))
	for _, e := range events {
		id := e.ResourceID
		if done[id] {
			continue
		}
		done[id] = true
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

// eventFeed returns the store's event feed, or an error when it keeps none.
func (s *Service) eventFeed() (EventFeed, error) {
	feed, ok := s.store.(EventFeed)
	if !ok {
		return nil, errors.New("this store keeps no event feed: resources cannot be watched")
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
