package watcher_test

import (
	"context"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/watcher"
)

// announcingSource is a fakeSource whose listeners may announce entries, as the PostgreSQL
// store's do for a resource created alone.
type announcingSource struct{ *fakeSource }

func (s announcingSource) ListenAnnouncedChanges(ctx context.Context) (domain.ChangeAnnouncer, error) {
	l, err := s.ListenChanges(ctx)
	if err != nil {
		return nil, err
	}
	return l.(*fakeListener), nil
}

// startAnnouncing starts a watcher on an announcing source as startListening does, and
// returns its listener.
func (s *resourcesSuite) startAnnouncing(c *gc.C) (watcher.OwnedWatcher, *fakeListener) {
	s.config.Source = announcingSource{s.source}
	w := s.start(c)
	nextEvent(c, w)
	l := s.waitListener(c)
	s.nextRead(c)
	for len(s.nextRead(c)) == s.config.BatchSize {
	}
	return w, l
}

// An announced entry goes out without any read of the log (every read is held here until
// the batch is taken, and the wake-up that follows an announcement is held back), and once
// only: the read that reaches it skips it.
func (s *resourcesSuite) TestAnAnnouncedEntryGoesOutWithoutReadingTheLog(c *gc.C) {
	w, l := s.startAnnouncing(c)
	defer workertest.CleanKill(c, w)
	gate := make(chan struct{})
	s.source.mu.Lock()
	s.source.readGate = gate
	s.source.mu.Unlock()

	seq := s.source.commit("a1")
	l.announce <- domain.Change{Seq: seq, ResourceID: "a1", Owner: "alice"}
	c.Check(nextOwnedEvent(c, w), gc.DeepEquals, []watcher.Owned{{ID: "a1", Owner: "alice"}})
	c.Check(report(w)["queued-ahead"], gc.Equals, 1)

	close(gate)
	s.source.notify()
	s.waitRead(c, seq)
	s.sync(c)
	assertNoEvent(c, w)
	c.Check(report(w)["cursor"], gc.Equals, seq)
	c.Check(report(w)["queued-ahead"], gc.Equals, 0)
}

// An announcement that arrives after a read has reached its entry is dropped: the entry
// went out with the read.
func (s *resourcesSuite) TestAnAnnouncementAReadReachedFirstIsDropped(c *gc.C) {
	w, l := s.startAnnouncing(c)
	defer workertest.CleanKill(c, w)

	seq := s.source.commit("a1")
	s.source.notify()
	s.waitRead(c, seq)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a1"})

	l.announce <- domain.Change{Seq: seq, ResourceID: "a1", Owner: "alice"}
	s.source.notify()
	s.nextRead(c)
	assertNoEvent(c, w)
	c.Check(report(w)["queued-ahead"], gc.Equals, 0)
}
