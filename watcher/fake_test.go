package watcher_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/domain"
)

// fakeSource is an in-memory change log. Sequence numbers are taken (reserve) and made
// visible (commit) separately, so tests can produce the out-of-order commits and rollbacks a
// real database does.
type fakeSource struct {
	mu        sync.Mutex
	nextSeq   int64
	committed map[int64]string // seq -> resource id
	attention []string
	// deadLeased are the resources ResourcesOfDeadAgents lists.
	deadLeased []string
	// overdue are the resources OverdueResources lists; overdueFor is what it was last given.
	overdue    []string
	overdueFor time.Duration
	// quiet are the resources QuietResources lists; quietFor and quietLimit are what it was
	// last given, quietReads how often it was called.
	quiet      []string
	quietFor   time.Duration
	quietLimit int
	quietReads int
	// owners are the resources' owners (an id it does not name is the default owner's);
	// policies are what ListOwnerPolicies lists.
	owners   map[string]string
	policies []domain.OwnerPolicy

	// readErr, when set, fails every read of the log.
	readErr error
	// listenErrs are returned, one per call, by ListenChanges before it succeeds again.
	listenErrs []error
	// listenHangs makes ListenChanges block until its context ends.
	listenHangs bool
	listeners   []*fakeListener

	// listens receives every listener that ListenChanges opens.
	listens chan *fakeListener
	// reads receives the entries every ChangesAfter call returns.
	reads chan []domain.Change
	// readGate, when set, holds every ChangesAfter call until it is closed.
	readGate chan struct{}
}

func newFakeSource() *fakeSource {
	return &fakeSource{
		nextSeq:   1,
		committed: make(map[int64]string),
		owners:    make(map[string]string),
		listens:   make(chan *fakeListener, 100),
		reads:     make(chan []domain.Change, 1000),
	}
}

// reserve takes a sequence number without making it visible.
func (s *fakeSource) reserve() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := s.nextSeq
	s.nextSeq++
	return seq
}

// commitReserved makes a reserved entry visible.
func (s *fakeSource) commitReserved(seq int64, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed[seq] = id
}

// commit appends visible entries for ids, one each, and returns the last seq.
func (s *fakeSource) commit(ids ...string) int64 {
	var seq int64
	for _, id := range ids {
		seq = s.reserve()
		s.commitReserved(seq, id)
	}
	return seq
}

// notify wakes every open listener, coalescing like the database does.
func (s *fakeSource) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.listeners {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (s *fakeSource) setAttention(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attention = ids
}

func (s *fakeSource) setReadErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readErr = err
}

func (s *fakeSource) LatestChangeSeq(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return 0, s.readErr
	}
	var latest int64
	for seq := range s.committed {
		latest = max(latest, seq)
	}
	return latest, nil
}

func (s *fakeSource) ChangesAfter(ctx context.Context, after int64, limit int) ([]domain.Change, error) {
	s.mu.Lock()
	gate := s.readGate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	var out []domain.Change
	for _, change := range s.sortedLocked() {
		if change.Seq > after && len(out) < limit {
			out = append(out, change)
		}
	}
	s.reads <- out
	return out, nil
}

// NewestChanges is domain.ChangeLog's: the newest limit entries after after, each marked
// when no entry of its owner lies after cursor and before the oldest of them, within reach.
func (s *fakeSource) NewestChanges(ctx context.Context, cursor, after int64, limit, reach int) ([]domain.NewestChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	sorted := s.sortedLocked()
	var tail []domain.NewestChange
	for i := len(sorted) - 1; i >= 0 && len(tail) < limit && sorted[i].Seq > after; i-- {
		tail = append([]domain.NewestChange{{Change: sorted[i]}}, tail...)
	}
	if len(tail) == 0 {
		return nil, nil
	}
	oldest := tail[0].Seq
	behind := map[string]bool{}
	for _, change := range sorted {
		if change.Seq > cursor && change.Seq < oldest {
			behind[change.Owner] = true
		}
	}
	for i := range tail {
		tail[i].OwnerFirst = oldest-cursor <= int64(reach) && !behind[tail[i].Owner]
	}
	return tail, nil
}

func (s *fakeSource) ChangesIn(ctx context.Context, seqs []int64) ([]domain.Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	var out []domain.Change
	for _, seq := range seqs {
		if id, ok := s.committed[seq]; ok {
			out = append(out, domain.Change{Seq: seq, ResourceID: id, Owner: s.owners[id]})
		}
	}
	return out, nil
}

func (s *fakeSource) PruneChanges(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	return 0, errors.New("the watcher never prunes")
}

// ResourcesNeedingAttention pages through attention, which the tests keep in id order.
func (s *fakeSource) ResourcesNeedingAttention(ctx context.Context, afterID string, limit int) ([]domain.Attention, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	var out []domain.Attention
	for _, id := range s.attention {
		if id > afterID && len(out) < limit {
			out = append(out, domain.Attention{ID: id, Owner: s.owners[id]})
		}
	}
	return out, nil
}

// setOwner makes owner the owner of ids.
func (s *fakeSource) setOwner(owner string, ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.owners[id] = owner
	}
}

func (s *fakeSource) setPolicies(policies ...domain.OwnerPolicy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policies = policies
}

func (s *fakeSource) ResourceOwners(ctx context.Context, ids []string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		out[id] = s.owners[id]
	}
	return out, nil
}

func (s *fakeSource) ListOwnerPolicies(ctx context.Context) ([]domain.OwnerPolicy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]domain.OwnerPolicy(nil), s.policies...), nil
}

func (s *fakeSource) setDeadLeased(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadLeased = ids
}

func (s *fakeSource) ResourcesOfDeadAgents(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	return append([]string(nil), s.deadLeased...), nil
}

func (s *fakeSource) setOverdue(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overdue = ids
}

func (s *fakeSource) setQuiet(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quiet = ids
}

func (s *fakeSource) QuietResources(ctx context.Context, quietFor time.Duration, limit int) ([]domain.Attention, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	s.quietFor, s.quietLimit = quietFor, limit
	s.quietReads++
	var out []domain.Attention
	for _, id := range s.quiet[:min(limit, len(s.quiet))] {
		out = append(out, domain.Attention{ID: id, Owner: s.owners[id]})
	}
	return out, nil
}

func (s *fakeSource) OverdueResources(ctx context.Context, overdueFor time.Duration, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	s.overdueFor = overdueFor
	return append([]string(nil), s.overdue[:min(limit, len(s.overdue))]...), nil
}

func (s *fakeSource) ListenChanges(ctx context.Context) (domain.ChangeListener, error) {
	s.mu.Lock()
	if s.listenHangs {
		s.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if len(s.listenErrs) > 0 {
		err := s.listenErrs[0]
		s.listenErrs = s.listenErrs[1:]
		s.mu.Unlock()
		return nil, err
	}
	l := &fakeListener{
		announce: make(chan domain.Change, 10),
		wake:     make(chan struct{}, 1),
		fail:     make(chan error, 1),
		closed:   make(chan struct{}),
	}
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
	s.listens <- l
	return l, nil
}

func (s *fakeSource) sortedLocked() []domain.Change {
	out := make([]domain.Change, 0, len(s.committed))
	for seq, id := range s.committed {
		out = append(out, domain.Change{Seq: seq, ResourceID: id, Owner: s.owners[id]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// fakeListener delivers the source's wake-ups and the announcements sent on announce;
// fail breaks it.
type fakeListener struct {
	announce  chan domain.Change
	wake      chan struct{}
	fail      chan error
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *fakeListener) Wait(ctx context.Context) error {
	select {
	case <-l.wake:
		return nil
	case err := <-l.fail:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitAnnounced gives an announcement waiting before any wake-up, as the database sends the
// announcement of an entry before its wake-up.
func (l *fakeListener) WaitAnnounced(ctx context.Context) (domain.Change, bool, error) {
	select {
	case change := <-l.announce:
		return change, true, nil
	default:
	}
	select {
	case change := <-l.announce:
		return change, true, nil
	case <-l.wake:
		return domain.Change{}, false, nil
	case err := <-l.fail:
		return domain.Change{}, false, err
	case <-ctx.Done():
		return domain.Change{}, false, ctx.Err()
	}
}

func (l *fakeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}
