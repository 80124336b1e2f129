package healthcheck

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

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/inflight"
)

// Store is the part of domain.State the worker uses.
type Store interface {
	CountResourcesByStatus(ctx context.Context) (map[domain.Status]int, error)
	ListCheckable(ctx context.Context, afterID string, limit int, holder string) ([]domain.Resource, error)
	RecordHealth(ctx context.Context, id string, checked domain.Checked, h domain.HealthUpdate) (domain.Resource, error)
	RecordRepairs(ctx context.Context, id string, repairs []string) error
}

// AgentLister lists the agents sharing the store (domain.AgentStore is one); an agent is
// live while its last heartbeat, on the database clock, is younger than ttl.
type AgentLister interface {
	ListAgents(ctx context.Context, ttl time.Duration) ([]domain.Agent, error)
}

// Environs resolves a provisioner name to its broker (*environ.Set is one).
type Environs interface {
	Get(name string) (environ.Environ, string, error)
}

// Locks keeps a resource's check off the provisioner's reconcile of it (*resourcelock.Set
// is one).
type Locks interface {
	// TryLock takes the resource's lock unless something holds it.
	TryLock(id string) (unlock func(), ok bool)
}

// Metrics counts what the worker finds (*metrics.Metrics is one).
type Metrics interface {
	// ObserveHealthCheck counts one resource check by its provisioner (a name in the
	// provisioner set, or metrics.Unknown) and its result (Result*).
	ObserveHealthCheck(provisioner, result string)
}

// Results of a resource check, as reported to Metrics. Every check that ran to its end is
// counted once, by the first of these that applies: error, unhealthy, repaired, healthy. A
// check whose row moved on meanwhile is still counted by what it found.
const (
	ResultError     = "error"     // the check could not be made (provisioner unknown, broker unavailable) or recorded
	ResultUnhealthy = "unhealthy" // CheckResource failed
	ResultRepaired  = "repaired"  // CheckResource passed after repairing the resource
	ResultHealthy   = "healthy"   // CheckResource passed
)

// Config holds what the worker needs: its dependencies, and its Settings.
type Config struct {
	Store    Store
	Environs Environs
	Clock    clock.Clock
	Rand     func() float64 // uniform in [0, 1), places each check in its slot
	Logger   *slog.Logger
	Metrics  Metrics
	Locks    Locks // shared with the provisioner
	// Agents lists the agents sharing the store: each round checks only the resources whose
	// rendezvous owner among the live agents (Agent.TTL) is Agent.ID. Without Agents the
	// worker is alone on its store and checks every resource; the agent's wiring (Manifold)
	// always passes the store.
	Agents AgentLister

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.NotValidf("health checker: nil Store")
	case c.Environs == nil:
		return errors.NotValidf("health checker: nil Environs")
	case c.Clock == nil:
		return errors.NotValidf("health checker: nil Clock")
	case c.Rand == nil:
		return errors.NotValidf("health checker: nil Rand")
	case c.Logger == nil:
		return errors.NotValidf("health checker: nil Logger")
	case c.Metrics == nil:
		return errors.NotValidf("health checker: nil Metrics")
	case c.Locks == nil:
		return errors.NotValidf("health checker: nil Locks (pass the lock set the provisioner shares)")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("health checker: %w", err)
	}
	return nil
}

// Worker runs health-check rounds; see the package doc.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config

	mu              sync.Mutex // guards the fields below, which Report reads
	round           roundStats // the round in progress
	lastRound       roundStats // the round before it
	lastRecordError string
	lastListError   string
	lastAgentsError string

	unrecorded unrecordedRepairs // repairs made whose record failed, for the next round
}

// roundStats describe one round for the report. Checks are counted in the round that
// started them, also when they end after the next round has started.
type roundStats struct {
	seq       int
	started   time.Time
	ends      time.Time // when the round's interval ends
	agents    int       // the live agents the round's resources are shared among
	resources int       // checks expected: estimated at the start, raised when more turn up
	share     int       // resources of this agent's share read so far
	checked   int
	skipped   int // due while their resource was being reconciled
	deferred  int // of its share, created after the round started: left for the next round
	unhealthy int // checks that failed
}

func (s roundStats) report() map[string]any {
	return map[string]any{
		"seq":       s.seq,
		"agents":    s.agents,
		"share":     s.share,
		"started":   s.started,
		"ends":      s.ends,
		"resources": s.resources,
		"checked":   s.checked,
		"skipped":   s.skipped,
		"deferred":  s.deferred,
		"unhealthy": s.unhealthy,
	}
}

// NewWorker starts a health checker.
func NewWorker(config Config) (worker.Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{config: config}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Kill asks the worker to stop; checks in flight are cancelled.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker, and every check it started, to stop.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Report shows the current round, the one before it, the last errors reading and
// recording, and how many resources have repairs kept for the next round to record.
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	report := map[string]any{
		"interval": w.config.Interval.String(),
	}
	if w.round.seq > 0 {
		for k, v := range w.round.report() {
			report["round-"+k] = v
		}
	}
	if w.lastRound.seq > 0 {
		report["last-round"] = w.lastRound.report()
	}
	if w.lastRecordError != "" {
		report["last-record-error"] = w.lastRecordError
	}
	if w.lastListError != "" {
		report["last-list-error"] = w.lastListError
	}
	if w.lastAgentsError != "" {
		report["last-agents-error"] = w.lastAgentsError
	}
	if n := w.unrecorded.count(); n > 0 {
		report["unrecorded-repairs"] = n
	}
	return report
}

// loop runs rounds, then cancels and waits for every check it started.
func (w *Worker) loop() error {
	return inflight.Run(&w.catacomb, w.run)
}

func (w *Worker) run(running *sync.WaitGroup) error {
	ctx := w.catacomb.Context(context.Background())
	// Sends never block: at most Concurrency checks are in flight.
	checks := make(chan checkDone, w.config.Concurrency)
	inFlight := 0

	var alarm clock.Alarm
	defer func() {
		if alarm != nil {
			alarm.Stop()
		}
	}()
	var r *round
	for {
		now := w.config.Clock.Now()
		if r == nil || (r.exhausted && !now.Before(r.end)) {
			seq, previous := 1, []string(nil)
			if r != nil {
				seq, previous = r.seq+1, r.agents
			}
			w.recordKept(ctx)
			r = w.startRound(ctx, seq, now, previous)
		}

		var wake time.Time
		for inFlight < w.config.Concurrency && !r.exhausted {
			if r.pos == len(r.page) {
				w.nextPage(ctx, r)
				continue
			}
			if r.headDue.IsZero() {
				r.drawHeadDue(w.config.Rand())
			}
			if r.headDue.After(now) {
				wake = earliest(wake, r.headDue)
				break
			}
			res := r.page[r.pos]
			prep := r.prepared[res.Provisioner]
			r.page[r.pos] = domain.Resource{}
			r.pos++
			r.index++
			r.headDue = time.Time{}
			inFlight++
			running.Add(1)
			seq := r.seq
			go func() {
				defer running.Done()
				done := w.check(ctx, res, prep)
				done.round = seq
				checks <- done
			}()
		}
		if r.exhausted {
			wake = earliest(wake, r.end)
		}

		if alarm != nil {
			alarm.Stop()
			alarm = nil
		}
		var alarmC <-chan time.Time
		if !wake.IsZero() {
			// An alarm at wake, not a timer for wake less a reading of the clock: the clock
			// may move between that reading and the timer's start, which would then fire
			// that much late.
			alarm = w.config.Clock.NewAlarm(wake)
			alarmC = alarm.Chan()
		}

		select {
		case <-w.catacomb.Dying():
			return w.catacomb.ErrDying()
		case <-alarmC:
		case done := <-checks:
			inFlight--
			w.checked(done)
		}
	}
}

// earliest is the earlier of a and b, where zero is no time at all.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// checked counts a resource check in the round that started it.
func (w *Worker) checked(done checkDone) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var stats *roundStats
	switch done.round {
	case w.round.seq:
		stats = &w.round
	case w.lastRound.seq:
		stats = &w.lastRound
	default:
		return
	}
	if done.skipped {
		stats.skipped++
	} else {
		stats.checked++
	}
	if done.failed {
		stats.unhealthy++
	}
}

// now returns the worker's time at the precision the database keeps.
func (w *Worker) now() time.Time {
	return w.config.Clock.Now().Truncate(time.Microsecond)
}
