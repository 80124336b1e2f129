package provisioner_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/juju/clock"
	gc "gopkg.in/check.v1"
	"gopkg.in/tomb.v2"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/watcher"
)

// shortWait is how long a test waits to see that no gated call comes.
const shortWait = 50 * time.Millisecond

// fakeState is an in-memory ResourceState that keeps the domain contract: leases with
// expiry and a token every claim bumps, writes refused with a LeaseHeldError once the lease
// they carry is not the row's, takeovers of expired leases reported, ErrStale when the generation moved on or a delete was requested, FinalizeDelete
// only of deleting rows, and the reason's times (WaitingSince set when the reason becomes
// WaitingForCapacity or ResizeWaitingForCapacity, kept while it stays, cleared otherwise;
// LastAttemptAt on every update), on the fake's clock, which is the database's. Tests wait on it with waitFor
// rather than sleeping.
type fakeState struct {
	clock clock.Clock

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every call
	rows         map[string]*domain.Resource
	leases       map[string]lease
	claims       map[string]int
	releases     map[string]int               // leases given up, by ReleaseResource or a releasing record
	releaseCalls map[string]int               // ReleaseResource calls
	handOvers    map[string]int               // HandOverResource calls
	starts       map[string][]domain.Resource // rows as ClaimAndStart started them
	updates      map[string][]domain.ProgressUpdate
	// unclaimedAsked are the ids UnclaimedResources was asked about, in order.
	unclaimedAsked []string
	claimErrs      []error          // returned by the next claims, in order
	tokens         map[string]int64 // the lease token of each row, bumped by every claim
	refused        map[string]int   // writes refused because their lease was not the row's
}

type lease struct {
	holder  string
	expires time.Time
	token   int64
}

func newFakeState(clk clock.Clock) *fakeState {
	return &fakeState{
		clock:        clk,
		changed:      make(chan struct{}),
		rows:         make(map[string]*domain.Resource),
		leases:       make(map[string]lease),
		claims:       make(map[string]int),
		releases:     make(map[string]int),
		releaseCalls: make(map[string]int),
		handOvers:    make(map[string]int),
		starts:       make(map[string][]domain.Resource),
		updates:      make(map[string][]domain.ProgressUpdate),
		tokens:       make(map[string]int64),
		refused:      make(map[string]int),
	}
}

// notify wakes waitFor; the caller holds mu.
func (s *fakeState) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *fakeState) ClaimResource(_ context.Context, id, holder string, ttl time.Duration) (domain.Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.claims[id]++
	if len(s.claimErrs) > 0 {
		err := s.claimErrs[0]
		s.claimErrs = s.claimErrs[1:]
		return domain.Claim{}, err
	}
	row, ok := s.rows[id]
	if !ok {
		return domain.Claim{}, domain.ErrNotFound
	}
	now := s.clock.Now()
	var takeover *domain.Takeover
	if l, ok := s.leases[id]; ok && l.holder != holder {
		if l.expires.After(now) {
			return domain.Claim{}, &domain.LeaseHeldError{Holder: l.holder, ExpiresAt: l.expires}
		}
		takeover = &domain.Takeover{PreviousHolder: l.holder, Waited: now.Sub(l.expires)}
	}
	s.tokens[id]++
	s.leases[id] = lease{holder: holder, expires: now.Add(ttl), token: s.tokens[id]}
	row.LeaseToken = s.tokens[id]
	return domain.Claim{
		Resource: copyResource(*row),
		Lease:    domain.Lease{Holder: holder, Token: s.tokens[id]},
		Takeover: takeover,
	}, nil
}

// ClaimAndStart claims like ClaimResource and starts an untouched row as the stores do.
func (s *fakeState) ClaimAndStart(ctx context.Context, id, holder string, ttl time.Duration, start domain.ProvisioningStart) (domain.Claim, error) {
	c, err := s.ClaimResource(ctx, id, holder, ttl)
	if err != nil {
		return c, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	row := s.rows[id]
	if row.Paused || row.Hibernate || row.Status != domain.StatusPending || row.Reason != domain.ReasonCreated || row.NextAttemptAt != nil ||
		(row.Provisioner != "" && row.Provisioner != start.Provisioner) || !slices.Contains(start.Types, row.Type) {
		return c, nil
	}
	row.Status, row.Reason = domain.StatusProvisioning, domain.ReasonProvisioning
	row.StatusMessage = domain.ProvisioningMessage(row.Generation)
	row.WaitingSince = nil
	row.Provisioner = start.Provisioner
	s.starts[id] = append(s.starts[id], copyResource(*row))
	c.Resource, c.Started = copyResource(*row), true
	return c, nil
}

func (s *fakeState) ReleaseResource(_ context.Context, id string, held domain.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.releaseCalls[id]++
	if l, ok := s.leases[id]; ok && l.holder == held.Holder && l.token == held.Token {
		delete(s.leases, id)
		s.releases[id]++
	}
	return nil
}

func (s *fakeState) HandOverResource(_ context.Context, id string, held domain.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.handOvers[id]++
	if l, ok := s.leases[id]; ok && l.holder == held.Holder && l.token == held.Token {
		delete(s.leases, id)
		s.releases[id]++
	}
	return nil
}

// handOverCount is how often HandOverResource was called for id.
func (s *fakeState) handOverCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handOvers[id]
}

// holds checks that held is id's live lease, as the stores do: otherwise the error names the
// current holder ("" when none). The caller holds mu.
func (s *fakeState) holds(id string, held domain.Lease) error {
	l, ok := s.leases[id]
	if !ok || l.holder != held.Holder || l.token != held.Token || !l.expires.After(s.clock.Now()) {
		s.refused[id]++
		return fmt.Errorf("lease of %s (claim %d) lost: %w", held.Holder, held.Token, &domain.LeaseHeldError{Holder: l.holder, ExpiresAt: l.expires})
	}
	return nil
}

// fence takes id's lease over for holder, as another agent's claim would: every write under
// the lease held so far is refused from now on.
func (s *fakeState) fence(id, holder string, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.tokens[id]++
	s.leases[id] = lease{holder: holder, expires: s.clock.Now().Add(ttl), token: s.tokens[id]}
}

// refusedCount is how many writes for id were refused because their lease was not the row's.
func (s *fakeState) refusedCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[id]
}

func (s *fakeState) RecordProgress(_ context.Context, id string, held domain.Lease, u domain.ProgressUpdate) (domain.Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	row, ok := s.rows[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	if err := s.holds(id, held); err != nil {
		return domain.Resource{}, err
	}
	if u.Generation != row.Generation || (row.Status == domain.StatusDeleting && u.Status != domain.StatusDeleting) {
		return domain.Resource{}, domain.ErrStale
	}
	s.updates[id] = append(s.updates[id], u)
	now := s.clock.Now()
	switch {
	case u.Reason != domain.ReasonWaitingForCapacity && u.Reason != domain.ReasonResizeWaitingForCapacity:
		row.WaitingSince = nil
	case row.Reason != u.Reason || row.WaitingSince == nil:
		row.WaitingSince = &now
	}
	row.LastAttemptAt = &now
	row.Status = u.Status
	row.Reason = u.Reason
	row.StatusMessage = u.StatusMessage
	if u.Provisioner != "" {
		row.Provisioner = u.Provisioner
	}
	if u.State != nil {
		row.State = maps.Clone(u.State)
	}
	if u.Config != nil {
		row.Config = maps.Clone(u.Config)
	}
	if u.ObservedGeneration != nil {
		row.ObservedGeneration = *u.ObservedGeneration
	}
	if u.Status == domain.StatusReady && row.ReadyAt == nil {
		row.ReadyAt = &now
	}
	row.Attempts = u.Attempts
	row.NextAttemptAt = nil
	if u.RetryIn > 0 {
		// The fake's clock is the database's.
		t := now.Add(u.RetryIn)
		row.NextAttemptAt = &t
	}
	row.LastError = u.LastError
	if u.ReleaseLease {
		delete(s.leases, id)
		s.releases[id]++
	}
	return copyResource(*row), nil
}

// UnclaimedResources returns those of ids that exist, are not up to date and whose lease is
// free or expired, and records the ids it was asked about.
func (s *fakeState) UnclaimedResources(_ context.Context, ids []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unclaimedAsked = append(s.unclaimedAsked, ids...)
	var out []string
	for _, id := range ids {
		row, ok := s.rows[id]
		if !ok || !needsAttention(row) {
			continue
		}
		if l, ok := s.leases[id]; ok && l.expires.After(s.clock.Now()) {
			continue
		}
		out = append(out, id)
	}
	return out, nil
}

// needsAttention is the stores' rule for a row the agent has work to do on.
func needsAttention(r *domain.Resource) bool {
	if r.Paused {
		return false
	}
	switch r.Status {
	case domain.StatusPending, domain.StatusProvisioning, domain.StatusDeleting, domain.StatusError, domain.StatusHibernating:
		return true
	}
	if r.Hibernate {
		return r.Status != domain.StatusHibernated
	}
	return r.Status == domain.StatusHibernated || r.Generation != r.ObservedGeneration
}

// setPaused pauses or resumes the row, as SetPaused does.
func (s *fakeState) setPaused(id string, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.rows[id].Paused = paused
}

// setHibernate asks for the row to be hibernated or woken, as SetHibernate does: the retry
// bookkeeping is reset.
func (s *fakeState) setHibernate(id string, hibernate bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	row := s.rows[id]
	row.Hibernate = hibernate
	row.Attempts, row.NextAttemptAt, row.LastError = 0, nil, ""
}

// requestRetry clears the row's backoff and permanent failure, as RequestRetry does.
func (s *fakeState) requestRetry(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	row := s.rows[id]
	now := s.clock.Now()
	row.RetryRequestedAt = &now
	row.Attempts, row.NextAttemptAt, row.LastError = 0, nil, ""
}

func (s *fakeState) FinalizeDelete(_ context.Context, id string, held domain.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	row, ok := s.rows[id]
	if !ok {
		return domain.ErrNotFound
	}
	if err := s.holds(id, held); err != nil {
		return err
	}
	if row.Status != domain.StatusDeleting {
		return domain.ErrStale
	}
	delete(s.rows, id)
	delete(s.leases, id)
	return nil
}

// add inserts r as it is (tests set whatever status and bookkeeping they need).
func (s *fakeState) add(r domain.Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	if r.Generation == 0 {
		r.Generation = 1
	}
	if r.Status == "" {
		r.Status = domain.StatusPending
	}
	if r.Reason == "" && r.Status == domain.StatusPending && r.StatusMessage == "" {
		r.Reason = domain.ReasonCreated
	}
	if r.Type == "" {
		r.Type = domain.ResourceTypeRuntime
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.clock.Now()
	}
	s.rows[r.ID] = &r
}

// updateArgs changes args the way the database does: generation bumped, retry bookkeeping
// cleared.
func (s *fakeState) updateArgs(id string, args map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	row := s.rows[id]
	row.Args = args
	row.Generation++
	row.Attempts, row.NextAttemptAt, row.LastError = 0, nil, ""
}

// requestDelete moves the row to deleting and clears its retry bookkeeping.
func (s *fakeState) requestDelete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	row := s.rows[id]
	row.Status, row.Reason = domain.StatusDeleting, domain.ReasonDeleteRequested
	row.StatusMessage = "delete requested"
	row.WaitingSince = nil
	row.Attempts, row.NextAttemptAt, row.LastError = 0, nil, ""
}

// edit changes the row as a plain-SQL write that logs no change would (a fix of its state
// or config).
func (s *fakeState) edit(id string, f func(r *domain.Resource)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.rows[id])
}

func (s *fakeState) setLease(id, holder string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[id]++
	s.leases[id] = lease{holder: holder, expires: expires, token: s.tokens[id]}
}

func (s *fakeState) get(id string) (domain.Resource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	row, ok := s.rows[id]
	if !ok {
		return domain.Resource{}, false
	}
	return copyResource(*row), true
}

func (s *fakeState) leased(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.leases[id]
	return ok
}

func (s *fakeState) claimCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims[id]
}

// started returns the rows as ClaimAndStart started them, oldest first.
func (s *fakeState) started(id string) []domain.Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]domain.Resource(nil), s.starts[id]...)
}

// releaseCallCount is how often ReleaseResource was called for id.
func (s *fakeState) releaseCallCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releaseCalls[id]
}

func (s *fakeState) progress(id string) []domain.ProgressUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]domain.ProgressUpdate(nil), s.updates[id]...)
}

// waitFor waits until pred, called with the state locked, holds.
func (s *fakeState) waitFor(c *gc.C, what string, pred func() bool) {
	timeout := time.After(testkit.LongWait)
	for {
		s.mu.Lock()
		ok := pred()
		changed := s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			c.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitRow waits until id's row satisfies pred and returns it.
func (s *fakeState) waitRow(c *gc.C, id, what string, pred func(r *domain.Resource) bool) domain.Resource {
	var out domain.Resource
	s.waitFor(c, id+" "+what, func() bool {
		row, ok := s.rows[id]
		if !ok || !pred(row) {
			return false
		}
		out = copyResource(*row)
		return true
	})
	return out
}

// waitIdle waits until id has been claimed n times in all and its lease is released.
func (s *fakeState) waitIdle(c *gc.C, id string, claims int) {
	s.waitFor(c, fmt.Sprintf("%s claimed %d times and released", id, claims), func() bool {
		_, leased := s.leases[id]
		return s.claims[id] >= claims && !leased
	})
}

func (s *fakeState) waitGone(c *gc.C, id string) {
	s.waitFor(c, id+" removed", func() bool {
		_, ok := s.rows[id]
		return !ok
	})
}

func copyResource(r domain.Resource) domain.Resource {
	r.Unreadable = slices.Clone(r.Unreadable)
	r.Args = maps.Clone(r.Args)
	r.State = maps.Clone(r.State)
	r.Config = maps.Clone(r.Config)
	r.Labels = maps.Clone(r.Labels)
	if r.NextAttemptAt != nil {
		t := *r.NextAttemptAt
		r.NextAttemptAt = &t
	}
	for _, t := range []**time.Time{&r.ReadyAt, &r.WaitingSince, &r.LastAttemptAt} {
		if *t != nil {
			v := **t
			*t = &v
		}
	}
	return r
}

// fakeEnviron is a scriptable broker of runtimes: Reconcile returns a State of the
// generation and a Config naming the host, Hibernate a State that says it hibernated. Each
// operation pops its next scripted error (nil: succeed). When gated, Reconcile and AwaitReady
// log "reconcile:<id>" or "await:<id>" on entered and wait at gate (or the end of their
// context). It counts how many calls run at once, overall and per resource. Its Environ is
// the same broker without Hibernate.
type fakeEnviron struct {
	environtest.Hibernator
	gate    *environtest.Gate
	entered *environtest.Calls[string]

	mu         sync.Mutex
	errs       map[string][]error // scripted errors by operation
	calls      map[string]int     // "reconcile", "await", "deprovision", "hibernate" -> count
	opts       []environ.ResourceOptions
	inputs     []environ.Resource
	active     int
	maxActive  int
	activeByID map[string]int
	maxByID    int
	activeByOp map[string]int // calls of each operation in flight
	maxByOp    map[string]int // the most calls of each operation in flight at once

	kept          bool // Reconcile returns Kept: the broker keeps its state itself
	gateReconcile bool
	gateAwait     bool
}

func newFakeEnviron() *fakeEnviron {
	e := &fakeEnviron{
		gate:       environtest.NewGate(),
		entered:    environtest.NewCalls[string](),
		errs:       make(map[string][]error),
		calls:      make(map[string]int),
		activeByID: make(map[string]int),
		activeByOp: make(map[string]int),
		maxByOp:    make(map[string]int),
	}
	e.Hibernator = environtest.Hibernator{
		Environ: environtest.Environ{
			SupportsFn: func(t domain.ResourceType) bool { return t == domain.ResourceTypeRuntime },
			ReconcileFn: func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
				end, err, gated := e.begin("reconcile", r.ID)
				defer end()
				e.record(r, opts)
				if gated {
					if werr := e.wait(ctx, "reconcile", r.ID); werr != nil {
						return nil, werr
					}
				}
				if err != nil {
					return nil, err
				}
				e.mu.Lock()
				kept := e.kept
				e.mu.Unlock()
				return &environ.Resource{
					ID:     r.ID,
					Type:   r.Type,
					State:  map[string]any{"generation": opts.Generation},
					Config: map[string]any{"host": "host-" + r.ID},
					Kept:   kept,
				}, nil
			},
			AwaitReadyFn: func(ctx context.Context, r *environ.Resource) error {
				end, err, gated := e.begin("await", r.ID)
				defer end()
				if gated {
					if werr := e.wait(ctx, "await", r.ID); werr != nil {
						return werr
					}
				}
				return err
			},
			DeprovisionFn: func(_ context.Context, r *environ.Resource) error {
				end, err, _ := e.begin("deprovision", r.ID)
				defer end()
				e.record(r, nil)
				return err
			},
			CheckResourceFn: func(context.Context, *environ.Resource, *environ.ResourceOptions) (*environ.Resource, error) {
				return nil, errors.New("the provisioner worker does not health-check")
			},
		},
		HibernateFn: func(_ context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
			end, err, _ := e.begin("hibernate", r.ID)
			defer end()
			e.record(r, opts)
			if err != nil {
				return nil, err
			}
			return &environ.Resource{ID: r.ID, Type: r.Type, State: map[string]any{"hibernated": true, "generation": opts.Generation}}, nil
		},
	}
	return e
}

// begin counts a call of op for resource id and returns the function that ends it, its
// scripted error and whether it is gated.
func (e *fakeEnviron) begin(op, id string) (func(), error, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls[op]++
	e.active++
	e.activeByID[id]++
	e.maxActive = max(e.maxActive, e.active)
	e.maxByID = max(e.maxByID, e.activeByID[id])
	e.activeByOp[op]++
	e.maxByOp[op] = max(e.maxByOp[op], e.activeByOp[op])
	var err error
	if script := e.errs[op]; len(script) > 0 {
		err, e.errs[op] = script[0], script[1:]
	}
	gated := (op == "reconcile" && e.gateReconcile) || (op == "await" && e.gateAwait)
	end := func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.active--
		e.activeByID[id]--
		e.activeByOp[op]--
	}
	return end, err, gated
}

// record keeps a call's resource and, when it has them, its options.
func (e *fakeEnviron) record(r *environ.Resource, opts *environ.ResourceOptions) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inputs = append(e.inputs, *r)
	if opts != nil {
		e.opts = append(e.opts, *opts)
	}
}

// wait blocks a gated call until the test opens the gate or ctx ends.
func (e *fakeEnviron) wait(ctx context.Context, op, id string) error {
	e.entered.Add(op + ":" + id)
	return e.gate.Wait(ctx)
}

func (e *fakeEnviron) callCount(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[op]
}

func (e *fakeEnviron) script(op string, errs ...error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs[op] = append(e.errs[op], errs...)
}

func (e *fakeEnviron) lastInput() environ.Resource {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inputs[len(e.inputs)-1]
}

func (e *fakeEnviron) lastOpts() environ.ResourceOptions {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.opts[len(e.opts)-1]
}

func (e *fakeEnviron) concurrency() (overall, perID int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.maxActive, e.maxByID
}

// opConcurrency is the most calls of op that were in flight at once.
func (e *fakeEnviron) opConcurrency(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.maxByOp[op]
}

// fakeWatcher delivers the ids tests send on changes.
type fakeWatcher struct {
	tomb    tomb.Tomb
	changes chan []watcher.Owned
}

func newFakeWatcher() *fakeWatcher {
	w := &fakeWatcher{changes: make(chan []watcher.Owned)}
	w.tomb.Go(func() error {
		<-w.tomb.Dying()
		return tomb.ErrDying
	})
	return w
}

func (w *fakeWatcher) Changes() <-chan []watcher.Owned { return w.changes }
func (w *fakeWatcher) Kill()                           { w.tomb.Kill(nil) }
func (w *fakeWatcher) Wait() error                     { return w.tomb.Wait() }

func (w *fakeWatcher) fail(err error) { w.tomb.Kill(err) }

// send sends ids, of the default owner.
func (w *fakeWatcher) send(c *gc.C, ids ...string) {
	batch := make([]watcher.Owned, len(ids))
	for i, id := range ids {
		batch[i] = watcher.Owned{ID: id}
	}
	w.sendOwned(c, batch...)
}

func (w *fakeWatcher) sendOwned(c *gc.C, batch ...watcher.Owned) {
	select {
	case w.changes <- batch:
	case <-time.After(testkit.LongWait):
		c.Fatalf("timed out sending %v to the worker", batch)
	}
}

// reconcileObservation is one ObserveReconcile (or ObserveCreateToReady) call.
type reconcileObservation struct {
	provisioner string
	typ         domain.ResourceType
	outcome     string
	d           time.Duration
}

// queueObservation is one ObserveQueue call.
type queueObservation struct{ depth, inFlight int }

// fakeMetrics records what the worker observes, in order.
type fakeMetrics struct {
	mu            sync.Mutex
	changed       chan struct{} // closed and replaced on every observation
	takeovers     []string      // the provisioner of each ObserveLeaseTakeover
	reconciles    []reconcileObservation
	queues        []queueObservation
	lastByClass   map[string]int         // the depth by class of the last ObserveQueue
	createToReady []reconcileObservation // without an outcome
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{changed: make(chan struct{})}
}

func (m *fakeMetrics) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *fakeMetrics) ObserveReconcile(provisioner string, t domain.ResourceType, outcome string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.notify()
	m.reconciles = append(m.reconciles, reconcileObservation{provisioner, t, outcome, d})
}

func (m *fakeMetrics) ObserveLeaseTakeover(provisioner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.notify()
	m.takeovers = append(m.takeovers, provisioner)
}

func (m *fakeMetrics) takeoverObservations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.takeovers...)
}

func (m *fakeMetrics) ObserveQueue(depthByClass map[string]int, inFlight int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.notify()
	depth := 0
	for _, n := range depthByClass {
		depth += n
	}
	m.queues = append(m.queues, queueObservation{depth, inFlight})
	m.lastByClass = maps.Clone(depthByClass)
}

func (m *fakeMetrics) ObserveCreateToReady(provisioner string, t domain.ResourceType, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.notify()
	m.createToReady = append(m.createToReady, reconcileObservation{provisioner: provisioner, typ: t, d: d})
}

// waitFor waits until pred, called with the metrics locked, holds.
func (m *fakeMetrics) waitFor(c *gc.C, what string, pred func() bool) {
	timeout := time.After(testkit.LongWait)
	for {
		m.mu.Lock()
		ok := pred()
		changed := m.changed
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			c.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitOutcomes waits for n reconciles to be observed and returns their outcomes in order.
func (m *fakeMetrics) waitOutcomes(c *gc.C, n int) []string {
	var out []string
	m.waitFor(c, fmt.Sprintf("%d reconciles observed", n), func() bool {
		if len(m.reconciles) < n {
			return false
		}
		out = nil
		for _, o := range m.reconciles {
			out = append(out, o.outcome)
		}
		return true
	})
	return out
}

func (m *fakeMetrics) reconcileObservations() []reconcileObservation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]reconcileObservation(nil), m.reconciles...)
}

func (m *fakeMetrics) createToReadyObservations() []reconcileObservation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]reconcileObservation(nil), m.createToReady...)
}
