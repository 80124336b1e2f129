// Package resourcelock keeps two of an agent's workers off the same resource at once: the
// provisioner holds a resource's lock for the whole of each reconcile or deprovision, and the
// health checker checks a resource only while it holds its lock, so a check never repairs
// what a reconcile is changing. It guards this process only; across agents the resource's
// reconcile lease does.
package resourcelock

import (
	"context"
	"fmt"
	"sync"
)

// Set is a set of locks, one per resource id. Its zero value is ready to use; it must not be
// copied once used. An id's entry exists only while its lock is held or awaited.
type Set struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	held  chan struct{} // holds a token while the lock is held
	users int           // the holder and the waiters; guarded by Set.mu
}

// Lock takes id's lock, waiting while another holds it, until ctx ends. unlock gives it up;
// calling it more than once is harmless.
func (s *Set) Lock(ctx context.Context, id string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock resource %s: %w", id, err)
	}
	l := s.use(id)
	select {
	case l.held <- struct{}{}:
		return s.unlocker(id, l), nil
	case <-ctx.Done():
		s.done(id, l)
		return nil, fmt.Errorf("lock resource %s: %w", id, ctx.Err())
	}
}

// TryLock takes id's lock if nothing holds it; ok is false, and unlock nil, when something
// does.
func (s *Set) TryLock(id string) (unlock func(), ok bool) {
	l := s.use(id)
	select {
	case l.held <- struct{}{}:
		return s.unlocker(id, l), true
	default:
		s.done(id, l)
		return nil, false
	}
}

// use returns id's lock, counting the caller as one of its users.
func (s *Set) use(id string) *lock {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locks == nil {
		s.locks = make(map[string]*lock)
	}
	l, ok := s.locks[id]
	if !ok {
		l = &lock{held: make(chan struct{}, 1)}
		s.locks[id] = l
	}
	l.users++
	return l
}

// done stops counting a user of id's lock, and forgets the lock when it has none left.
func (s *Set) done(id string, l *lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.users--
	if l.users == 0 {
		delete(s.locks, id)
	}
}

func (s *Set) unlocker(id string, l *lock) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			<-l.held
			s.done(id, l)
		})
	}
}
