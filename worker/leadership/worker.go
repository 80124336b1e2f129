// Package leadership runs the flag worker that holds this agent's claim on the leadership
// lease: one agent of those sharing a store runs what must run once (environ checks and
// orphan sweeps, capacity samples and warnings, change-log and history pruning). Those
// workers are gated on the flag (see Gate), as Juju gates its singular workers on an
// is-responsible flag, and those that write to the store carry the flag's Term with their
// writes (see TermOf): the store applies them only while that term holds, so a leader that
// resumed after losing the lease writes nothing even before its flag notices.
//
// The worker claims at start, before it returns, so its flag is fixed for its lifetime; it
// then claims (renews, or tries to take) every Interval on the database clock. When the
// claim says otherwise than the flag, it logs the change and stops with
// dependency.ErrBounce: the engine starts it again at once with the new flag, and restarts
// the gated workers with it. A leader whose claims fail for Agent.TTL gives the flag up the same
// way, since another agent may hold the lease by then. On stop a leader resigns, so another
// agent leads at its next claim.
//
//	start ──► claim ──► flag fixed ──► claim every Interval ──► Kill ──► resign if leader
//	                                         │ leadership gained or lost
//	                                         └──► ErrBounce (restart with the new flag)
package leadership

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/catacomb"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/internal/clocktimeout"

	"github.com/berth-dev/berth/domain"
)

// Store is the part of domain.State the worker uses.
type Store interface {
	ClaimLeadership(ctx context.Context, agentID string, session int64, ttl time.Duration) (leader string, mine bool, err error)
	ResignLeadership(ctx context.Context, agentID string, session int64) error
}

// Registration gives the session the agent is registered under (membership.Registration).
type Registration interface {
	Session() int64
	// Registered is closed once the agent has registered: a worker that started before
	// claims then, not an Interval later.
	Registered() <-chan struct{}
}

// Metrics records whether this agent leads (*metrics.Metrics is one).
type Metrics interface {
	ObserveLeader(leader bool)
}

// Config holds what the worker needs: its dependencies, its Settings, and the leader last
// seen.
type Config struct {
	Store        Store
	Registration Registration
	Clock        clock.Clock
	Logger       *slog.Logger
	Metrics      Metrics
	// Previous is the holder the agent last saw before this worker started, for the log
	// line of a change; empty for none.
	Previous string

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.NotValidf("leadership worker: nil Store (pass the agent's store)")
	case c.Registration == nil:
		return errors.NotValidf("leadership worker: nil Registration")
	case c.Clock == nil:
		return errors.NotValidf("leadership worker: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("leadership worker: nil Logger")
	case c.Metrics == nil:
		return errors.NotValidf("leadership worker: nil Metrics")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("leadership worker: %w", err)
	}
	return nil
}

// Flag is the worker's output: whether this agent leads, and under which term.
type Flag interface {
	Check() bool
	// Term is the leadership term a leader's writes carry (see domain.Term): the store
	// applies them only while it holds.
	Term() domain.Term
}

// Worker holds the claim; see the package doc.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config
	mine     bool // fixed for the worker's lifetime

	mu        sync.Mutex // guards what Report and Term read
	session   int64      // the session of the last claim, which a leader resigns with
	leader    string
	since     time.Time // when this worker last saw the holder change, on its clock
	renewed   time.Time // the last claim that held the lease, on its clock
	lastError string
}

// NewWorker claims once and starts the worker with the outcome as its flag.
func NewWorker(config Config) (*Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{config: config, leader: config.Previous}
	now := config.Clock.Now()
	w.since = now
	if leader, mine, err := w.claim(context.Background()); err != nil {
		w.lastError = err.Error()
		config.Logger.Warn("claiming leadership failed; trying again at the next claim", "error", err, "retry_in", config.Interval)
	} else {
		w.mine = mine
		w.leader = leader
		if mine {
			w.renewed = now
		}
	}
	w.logChange(config.Previous)
	config.Metrics.ObserveLeader(w.mine)
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Check says whether this agent leads.
func (w *Worker) Check() bool { return w.mine }

// Term is the term of the last claim: this agent under the session it claimed with.
func (w *Worker) Term() domain.Term {
	w.mu.Lock()
	defer w.mu.Unlock()
	return domain.Term{Holder: w.config.Agent.ID, Session: w.session}
}

// Leader is the holder the worker last saw, empty for none.
func (w *Worker) Leader() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leader
}

// Kill asks the worker to stop; a leader resigns before it does.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Report shows the leader, whether it is this agent and since when.
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	report := map[string]any{
		"leader": w.leader,
		"mine":   w.mine,
		"since":  w.since,
	}
	if w.lastError != "" {
		report["claim-error"] = w.lastError
	}
	return report
}

func (w *Worker) loop() error {
	ctx := w.catacomb.Context(context.Background())
	timer := w.config.Clock.NewTimer(w.config.Interval)
	defer timer.Stop()
	// Until the agent has registered there is no session to claim under; the claim is made
	// the moment there is one.
	var registered <-chan struct{}
	if w.Term().Session == 0 {
		registered = w.config.Registration.Registered()
	}
	for {
		select {
		case <-w.catacomb.Dying():
			w.resign()
			return w.catacomb.ErrDying()
		case <-registered:
			registered = nil
			if err := w.renew(ctx); err != nil {
				return err
			}
		case <-timer.Chan():
			timer.Reset(w.config.Interval)
			if err := w.renew(ctx); err != nil {
				return err
			}
		}
	}
}

// renew claims again and returns ErrBounce when the flag no longer says what the lease does.
func (w *Worker) renew(ctx context.Context) error {
	leader, mine, err := w.claim(ctx)
	now := w.config.Clock.Now()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		w.mu.Lock()
		w.lastError = err.Error()
		renewed := w.renewed
		w.mu.Unlock()
		if w.mine && now.Sub(renewed) >= w.config.Agent.TTL {
			w.config.Logger.Warn("leadership lost: no claim has held it for the agent ttl; another agent may lead",
				"agent-id", w.config.Agent.ID, "error", err, "ttl", w.config.Agent.TTL)
			w.config.Metrics.ObserveLeader(false)
			return dependency.ErrBounce
		}
		w.config.Logger.Warn("claiming leadership failed; trying again at the next claim", "error", err, "retry_in", w.config.Interval)
		return nil
	}
	if mine != w.mine {
		// The next worker logs the change, naming the holder this one saw last.
		return dependency.ErrBounce
	}
	w.mu.Lock()
	w.lastError = ""
	previous := w.leader
	if leader != previous {
		w.leader, w.since = leader, now
	}
	if mine {
		w.renewed = now
	}
	w.mu.Unlock()
	if leader != previous && !mine {
		w.config.Logger.Info("leadership moved", "leader", leader, "previous-leader", previous)
	}
	return nil
}

// claim claims the lease once, bounded by Timeout, under the agent's session. Without a
// session yet (the agent has not registered) it claims nothing.
func (w *Worker) claim(parent context.Context) (string, bool, error) {
	session := w.config.Registration.Session()
	if session == 0 {
		return "", false, errors.New("the agent is not registered yet")
	}
	w.mu.Lock()
	w.session = session
	w.mu.Unlock()
	ctx, cancel := clocktimeout.WithTimeout(parent, w.config.Clock, w.config.Timeout)
	defer cancel()
	leader, mine, err := w.config.Store.ClaimLeadership(ctx, w.config.Agent.ID, session, w.config.Agent.TTL)
	if err != nil {
		return "", false, withCause(ctx, err)
	}
	return leader, mine, nil
}

// logChange logs a gain or loss of leadership at start, naming the holder the agent saw
// before.
func (w *Worker) logChange(previous string) {
	wasMine := previous == w.config.Agent.ID
	switch {
	case w.mine && !wasMine:
		w.config.Logger.Info("leadership gained: this agent runs the environ checks, samples capacity, raises its warnings and prunes history",
			"agent-id", w.config.Agent.ID, "previous-leader", previous)
	case !w.mine && wasMine:
		w.config.Logger.Info("leadership lost", "agent-id", w.config.Agent.ID, "leader", w.leader)
	}
}

// resign gives the lease up when this agent holds it, on a context of its own bounded by
// Timeout, since the catacomb's has ended.
func (w *Worker) resign() {
	if !w.mine {
		return
	}
	w.config.Metrics.ObserveLeader(false)
	ctx, cancel := clocktimeout.WithTimeout(context.Background(), w.config.Clock, w.config.Timeout)
	defer cancel()
	if err := w.config.Store.ResignLeadership(ctx, w.config.Agent.ID, w.Term().Session); err != nil {
		w.config.Logger.Warn("resigning leadership failed; another agent leads once the lease expires",
			"agent-id", w.config.Agent.ID, "error", withCause(ctx, err), "ttl", w.config.Agent.TTL)
		return
	}
	w.config.Logger.Info("resigned leadership", "agent-id", w.config.Agent.ID)
}

// withCause adds why ctx ended, when it did, to err.
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

var _ worker.Worker = (*Worker)(nil)
