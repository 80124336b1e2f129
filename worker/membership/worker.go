// Package membership runs the worker that keeps this agent in the store's agents table: it
// registers at start, heartbeats every HeartbeatInterval (on the database clock) and, when
// the agent stops, resigns, which removes its row and gives up its resource leases in one
// transaction so that other agents can take its work at once. Once an hour it also removes
// agents that have not heartbeat for a day, so that the table shows only agents that may
// still come back. It records the names of the agent's provisioner set (Config.Provisioners)
// on its row when it registers and, when they change, with the next heartbeat, so that
// clients can tell a provisioner no live agent serves.
//
// A failed heartbeat is logged and tried again at the next one: the agent stays live while
// one heartbeat per ttl lands. A heartbeat refused because the session moved on (another
// process registered the same --agent-id, or the row was removed) ends the worker with that
// error; the dependency engine starts it again, which registers anew.
//
//	start ──► register ──► heartbeat every interval ──► Kill ──► resign ──► stopped
//	                              │ session moved on
//	                              └──────────► error (the engine restarts the worker)
package membership

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/catacomb"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/clocktimeout"
)

// Store is the part of domain.State the worker uses.
type Store interface {
	RegisterAgent(ctx context.Context, info domain.AgentInfo) (int64, error)
	HeartbeatAgent(ctx context.Context, id string, session int64) error
	ResignAgent(ctx context.Context, id string, session int64) error
	ListAgents(ctx context.Context, ttl time.Duration) ([]domain.Agent, error)
	PruneAgents(ctx context.Context, olderThan time.Duration) (int64, error)
	SetAgentProvisioners(ctx context.Context, id string, session int64, names []string) error
}

// Metrics records how many agents are live (*metrics.Metrics is one).
type Metrics interface {
	ObserveAgentsLive(n int)
}

// Config holds what the worker needs: its dependencies, and its Settings.
type Config struct {
	Store   Store
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics Metrics
	// Provisioners returns the names of the agent's provisioner set now, which the worker
	// records on the agent's row when it registers and, should they change (a reload),
	// with the next heartbeat, so that clients can warn of a provisioner no live agent
	// serves. Nil records none.
	Provisioners func() []string

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.NotValidf("membership worker: nil Store (pass the agent's store)")
	case c.Clock == nil:
		return errors.NotValidf("membership worker: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("membership worker: nil Logger")
	case c.Metrics == nil:
		return errors.NotValidf("membership worker: nil Metrics")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("membership worker: %w", err)
	}
	return nil
}

// Worker keeps the agent registered; see the package doc.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config

	mu     sync.Mutex // guards status, which Report reads
	status status
	// registered is closed by the first registration (registerOnce).
	registered   chan struct{}
	registerOnce sync.Once
}

// status is what Report shows.
type status struct {
	session        int64
	lastHeartbeat  time.Time // on the worker's clock; zero before the first
	liveAgents     int
	heartbeatError string
	// provisioners is what the agent's row names (Settings.Provisioners), nil until the
	// worker has recorded them.
	provisioners []string
}

// NewWorker starts a membership worker.
func NewWorker(config Config) (worker.Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{config: config, registered: make(chan struct{})}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Kill asks the worker to stop; it resigns before it does.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Session is the session the agent is registered under, 0 until it has registered.
func (w *Worker) Session() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status.session
}

// Registered is closed once the agent has registered.
func (w *Worker) Registered() <-chan struct{} { return w.registered }

// Report shows the agent's id and session, its last heartbeat and how many agents are live.
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	report := map[string]any{
		"id":          w.config.Agent.ID,
		"session":     w.status.session,
		"live-agents": w.status.liveAgents,
	}
	if !w.status.lastHeartbeat.IsZero() {
		report["last-heartbeat"] = w.status.lastHeartbeat
	}
	if w.status.heartbeatError != "" {
		report["heartbeat-error"] = w.status.heartbeatError
	}
	if w.status.provisioners != nil {
		report["provisioners"] = w.status.provisioners
	}
	return report
}

func (w *Worker) loop() error {
	ctx := w.catacomb.Context(context.Background())
	session, err := w.register(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return w.catacomb.ErrDying()
		}
		return err
	}
	w.prune(ctx)
	// Both timers are reset when they fire, before the I/O they start, so the heartbeats
	// keep their pace whatever the database's latency.
	heartbeat := w.config.Clock.NewTimer(w.config.HeartbeatInterval)
	defer heartbeat.Stop()
	prune := w.config.Clock.NewTimer(w.config.PruneInterval)
	defer prune.Stop()
	for {
		select {
		case <-w.catacomb.Dying():
			w.resign(session)
			return w.catacomb.ErrDying()
		case <-heartbeat.Chan():
			heartbeat.Reset(w.config.HeartbeatInterval)
			if err := w.heartbeat(ctx, session); err != nil {
				return err
			}
		case <-prune.Chan():
			prune.Reset(w.config.PruneInterval)
			w.prune(ctx)
		}
	}
}

// register records the agent and returns its session.
func (w *Worker) register(ctx context.Context) (int64, error) {
	ctx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, w.config.Timeout)
	defer cancel()
	session, err := w.config.Store.RegisterAgent(ctx, w.config.Agent)
	if err != nil {
		return 0, fmt.Errorf("register agent %s: %w", w.config.Agent.ID, withCause(ctx, err))
	}
	w.mu.Lock()
	w.status.session = session
	w.status.lastHeartbeat = w.config.Clock.Now()
	w.mu.Unlock()
	w.registerOnce.Do(func() { close(w.registered) })
	w.config.Logger.Info("registered", "agent-id", w.config.Agent.ID, "session", session)
	w.reportProvisioners(ctx, session)
	w.observeAgents(ctx)
	return session, nil
}

// reportProvisioners records the provisioners of the agent's set on its row when they
// differ from those it recorded last (a new session starts from none recorded). A failure
// is logged and the next heartbeat tries again.
func (w *Worker) reportProvisioners(ctx context.Context, session int64) {
	if w.config.Provisioners == nil {
		return
	}
	names := slices.Sorted(slices.Values(w.config.Provisioners()))
	if names == nil {
		names = []string{}
	}
	w.mu.Lock()
	same := w.status.provisioners != nil && slices.Equal(w.status.provisioners, names)
	w.mu.Unlock()
	if same {
		return
	}
	if err := w.config.Store.SetAgentProvisioners(ctx, w.config.Agent.ID, session, names); err != nil {
		w.config.Logger.Warn("recording the agent's provisioners failed; trying again at the next heartbeat",
			"agent-id", w.config.Agent.ID, "error", withCause(ctx, err), "retry_in", w.config.HeartbeatInterval)
		return
	}
	w.mu.Lock()
	w.status.provisioners = names
	w.mu.Unlock()
}

// heartbeat records one heartbeat and then the live agents. Only a session that moved on
// is an error; any other failure is logged and the next heartbeat tries again.
func (w *Worker) heartbeat(parent context.Context, session int64) error {
	ctx, cancel := clocktimeout.WithTimeout(parent, w.config.Clock, w.config.Timeout)
	defer cancel()
	err := w.config.Store.HeartbeatAgent(ctx, w.config.Agent.ID, session)
	switch {
	case errors.Is(err, domain.ErrSessionEnded):
		return fmt.Errorf("heartbeat: %w", err)
	case err != nil && parent.Err() != nil:
		// Stopping: the cancelled heartbeat is not worth a warning.
		return nil
	case err != nil:
		err = withCause(ctx, err)
		w.config.Logger.Warn("heartbeat failed; trying again at the next one",
			"agent-id", w.config.Agent.ID, "error", err, "retry_in", w.config.HeartbeatInterval)
		w.mu.Lock()
		w.status.heartbeatError = err.Error()
		w.mu.Unlock()
		return nil
	}
	w.mu.Lock()
	w.status.lastHeartbeat = w.config.Clock.Now()
	w.status.heartbeatError = ""
	w.mu.Unlock()
	w.reportProvisioners(ctx, session)
	w.observeAgents(ctx)
	return nil
}

// observeAgents counts the live agents for the metric and the report.
func (w *Worker) observeAgents(ctx context.Context) {
	agents, err := w.config.Store.ListAgents(ctx, w.config.TTL)
	if err != nil {
		w.config.Logger.Debug("listing agents failed; berth_agents_live keeps its value", "error", withCause(ctx, err))
		return
	}
	live := 0
	for _, a := range agents {
		if a.Live {
			live++
		}
	}
	w.mu.Lock()
	w.status.liveAgents = live
	w.mu.Unlock()
	w.config.Metrics.ObserveAgentsLive(live)
}

// prune removes the agents silent for longer than PruneAfter; a failure waits for the next
// prune.
func (w *Worker) prune(parent context.Context) {
	ctx, cancel := clocktimeout.WithTimeout(parent, w.config.Clock, w.config.Timeout)
	defer cancel()
	n, err := w.config.Store.PruneAgents(ctx, w.config.PruneAfter)
	switch {
	case err != nil && parent.Err() != nil:
	case err != nil:
		w.config.Logger.Warn("pruning dead agents failed; trying again later",
			"error", withCause(ctx, err), "retry_in", w.config.PruneInterval)
	case n > 0:
		w.config.Logger.Info("pruned dead agents", "agents", n, "silent_for", w.config.PruneAfter)
	}
}

// resign gives up the agent's registration and leases. It runs as the worker stops, so on a
// context of its own that outlives the catacomb's, bounded by ResignTimeout.
func (w *Worker) resign(session int64) {
	ctx, cancel := clocktimeout.WithTimeout(context.Background(), w.config.Clock, w.config.ResignTimeout)
	defer cancel()
	if err := w.config.Store.ResignAgent(ctx, w.config.Agent.ID, session); err != nil {
		w.config.Logger.Warn("resigning failed; other agents take over this agent's resources once their leases expire (--lease-ttl)",
			"agent-id", w.config.Agent.ID, "session", session, "error", withCause(ctx, err))
		return
	}
	w.config.Logger.Info("resigned: left the agents and gave up its resource leases", "agent-id", w.config.Agent.ID, "session", session)
}

// withCause adds why ctx ended, when it did, to err.
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}
