package provisioner

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
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/inflight"
	"github.com/berth-dev/berth/watcher"
)

// ResourceState is the part of domain.State the worker uses.
type ResourceState interface {
	ClaimResource(ctx context.Context, id, holder string, ttl time.Duration) (domain.Claim, error)
	ClaimAndStart(ctx context.Context, id, holder string, ttl time.Duration, start domain.ProvisioningStart) (domain.Claim, error)
	ReleaseResource(ctx context.Context, id string, lease domain.Lease) error
	HandOverResource(ctx context.Context, id string, lease domain.Lease) error
	RecordProgress(ctx context.Context, id string, lease domain.Lease, u domain.ProgressUpdate) (domain.Resource, error)
	FinalizeDelete(ctx context.Context, id string, lease domain.Lease) error
	UnclaimedResources(ctx context.Context, ids []string) ([]string, error)
}

// Environs resolves a provisioner name ("" = the default) to its broker and canonical name
// (*environ.Set is one).
type Environs interface {
	Get(name string) (environ.Environ, string, error)
	// ServedTypes lists the resource types env serves, of those the agent knows.
	ServedTypes(env environ.Environ) []domain.ResourceType
	// CheckType returns an *environ.UnknownTypeError, naming the served types, when no
	// environ of the agent serves type t.
	CheckType(t domain.ResourceType) error
}

// Locks keeps the agent's other workers off a resource while it is reconciled
// (*resourcelock.Set is one).
type Locks interface {
	// Lock takes the resource's lock, waiting until ctx ends while another holds it.
	Lock(ctx context.Context, id string) (unlock func(), err error)
}

// Watcher reports the ids of resources that need attention, with their owners; its first
// events list every one.
type Watcher interface {
	worker.Worker
	Changes() <-chan []watcher.Owned
}

// OwnerPolicies lists the owners' policies (domain.State is one).
type OwnerPolicies interface {
	ListOwnerPolicies(ctx context.Context) ([]domain.OwnerPolicy, error)
}

// Metrics records how reconciles go (*metrics.Metrics is one). Durations are measured on
// the worker's clock. The provisioner is a name of the provisioner set, or metrics.Unknown.
type Metrics interface {
	// ObserveReconcile counts one attempt that did something, by its outcome (Outcome*).
	ObserveReconcile(provisioner string, t domain.ResourceType, outcome string, d time.Duration)
	// ObserveQueue records the queue's depth by owner class ("" is the default class) and
	// the reconciles in flight. depthByClass is the worker's, filled again at each call:
	// it is read during the call and never kept.
	ObserveQueue(depthByClass map[string]int, inFlight int)
	// ObserveCreateToReady records a resource's time from creation to its first ready, as
	// the database's timestamps say.
	ObserveCreateToReady(provisioner string, t domain.ResourceType, d time.Duration)
	// ObserveLeaseTakeover counts a claim that took a resource's lease over from another
	// holder whose agent was no longer live or whose lease had expired.
	ObserveLeaseTakeover(provisioner string)
}

// Outcomes of a reconcile attempt, as reported to Metrics. Attempts that find nothing to
// do (up to date, a retry not yet due, another agent's lease) are not reported.
const (
	OutcomeReady     = "ready"     // brought to ready at its generation
	OutcomeRetry     = "retry"     // failed; retried with backoff
	OutcomeCapacity  = "capacity"  // no capacity; waits for room
	OutcomePermanent = "permanent" // failed for good at this generation
	OutcomeDeleted   = "deleted"   // deprovisioned and removed
	// OutcomeHibernated is a resource stopped with its data kept (Resource.Hibernate).
	OutcomeHibernated = "hibernated"
	OutcomeStale      = "stale" // the row moved on under the attempt; reconciled again
	// OutcomeBrokerUnavailable is a resource whose broker's breaker is open: it waits for
	// the next probe.
	OutcomeBrokerUnavailable = "broker-unavailable"
)

// Config holds what the worker needs: its dependencies, and its Settings.
type Config struct {
	State      ResourceState
	Environs   Environs
	NewWatcher func() (Watcher, error) // the worker starts the watcher and owns it
	Clock      clock.Clock
	Rand       func() float64 // uniform in [0, 1), for jitter
	Logger     *slog.Logger
	Metrics    Metrics
	Locks      Locks // held for the whole of each attempt
	// TracerProvider gets a span for each reconcile attempt, with the environ's calls as
	// its children; nil is the no-op provider (no traces).
	TracerProvider trace.TracerProvider

	// Agents lists the agents sharing the store: a changed resource whose rendezvous owner
	// among the live agents (Agent.TTL) is another agent is left to that agent for
	// ShareGrace, then reconciled here only if it still needs attention and no live agent
	// holds it. Without Agents the worker is alone and reconciles every changed resource at
	// once.
	Agents AgentLister

	// Breakers are the provisioners' circuit breakers (breaker.go); the zero value turns
	// them off.
	Breakers BreakerConfig

	// Owners lists the owners' policies, read every OwnerPoliciesInterval: their weights
	// set the owners' turns in the queue, their classes the queue-depth metric's labels.
	// Without Owners every owner has weight 1 and the default class.
	Owners OwnerPolicies

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.State == nil:
		return errors.NotValidf("provisioner: nil State")
	case c.Environs == nil:
		return errors.NotValidf("provisioner: nil Environs")
	case c.NewWatcher == nil:
		return errors.NotValidf("provisioner: nil NewWatcher")
	case c.Clock == nil:
		return errors.NotValidf("provisioner: nil Clock")
	case c.Rand == nil:
		return errors.NotValidf("provisioner: nil Rand")
	case c.Logger == nil:
		return errors.NotValidf("provisioner: nil Logger")
	case c.Metrics == nil:
		return errors.NotValidf("provisioner: nil Metrics")
	case c.Locks == nil:
		return errors.NotValidf("provisioner: nil Locks (pass the lock set the health checker shares)")
	}
	if err := c.Breakers.Validate(); err != nil {
		return err
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("provisioner: %w", err)
	}
	return nil
}

// queueHighWater is how many queued resources make the loop stop taking events from the
// watcher until they drain below it. The watcher holds the backlog, reads ahead of the loop
// and interleaves the owners; another owner's newer work reaches the loop's fair queue once
// the queue drains below the mark (an event's worth of starts) and is served in the next
// turn. The mark only has to keep every slot fed while the watcher reads.
const queueHighWater = 256

// leftHighWater is how many resources left to other agents make the loop stop taking
// events until they are due and taken up (ShareGrace): with several agents, most of each
// event is left to the others, so the bound is far above queueHighWater, while keeping a
// backlog from being held here rather than in the watcher.
const leftHighWater = 20000

// reportedOwners is how many owners, those with the most queued, the engine report lists
// with their queue depths.
const reportedOwners = 20

// bookkeepingTimeout bounds the database calls made after an attempt: recording its failure
// and releasing its lease.
const bookkeepingTimeout = 10 * time.Second

// Worker reconciles resources as its watcher reports them. See the package doc.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config
	tracer   trace.Tracer
	breakers *breakers

	// classDepths is the queue depths by owner class the loop last gave Metrics, filled
	// again at each publish; only the loop goroutine touches it.
	classDepths map[string]int

	mu sync.Mutex
	// report is the loop's state as last published (published false: not yet).
	report loopReport
	// depths is the owners' queue depths as last published; Report lists the deepest.
	depths map[string]int
}

// loopReport is the loop's state as Report shows it. The loop publishes it after every
// outcome, so it is a value Report turns into a map, not a map made each time.
type loopReport struct {
	published                                            bool
	queueDepth, queuedOwners, inFlight, concurrencyLimit int
	awaitingReady, waitingForCapacity, waitingForQuota   int
	waitingForBroker, scheduledRetries                   int
	leftToOwners, sharingWith                            int
	nextRetryAt                                          time.Time // zero: none scheduled
}

// asMap is r as the engine report lists it.
func (r loopReport) asMap() map[string]any {
	out := map[string]any{
		"queue-depth":          r.queueDepth,
		"queued-owners":        r.queuedOwners,
		"in-flight":            r.inFlight,
		"concurrency-limit":    r.concurrencyLimit,
		"awaiting-ready":       r.awaitingReady,
		"waiting-for-capacity": r.waitingForCapacity,
		"waiting-for-quota":    r.waitingForQuota,
		"waiting-for-broker":   r.waitingForBroker,
		"scheduled-retries":    r.scheduledRetries,
		"left-to-owners":       r.leftToOwners,
		"sharing-with":         r.sharingWith,
	}
	if !r.nextRetryAt.IsZero() {
		out["next-retry-at"] = r.nextRetryAt.UTC().Format(time.RFC3339)
	}
	return out
}

// NewWorker starts a worker that reconciles resources as config's watcher reports them.
func NewWorker(config Config) (worker.Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	tp := config.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	w := &Worker{config: config, tracer: tp.Tracer(TracerName), depths: map[string]int{}, classDepths: map[string]int{},
		breakers: newBreakers(config.Breakers, config.Clock, config.Agent.ID, config.Logger)}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Kill asks the worker to stop; reconciles in flight are cancelled.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker, and every reconcile it started, to stop.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Report describes the work queue for the engine report.
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]any{}
	if w.report.published {
		out = w.report.asMap()
	}
	out["queue-depth-by-owner"] = topOwners(w.depths, reportedOwners)
	if b := w.breakers.report(); len(b) > 0 {
		out["breakers"] = b
	}
	return out
}

// loop runs the scheduler, then cancels and waits for every reconcile it started.
func (w *Worker) loop() error {
	return inflight.Run(&w.catacomb, w.run)
}

func (w *Worker) run(running *sync.WaitGroup) error {
	watcher, err := w.config.NewWatcher()
	if err != nil {
		return fmt.Errorf("start resources watcher: %w", err)
	}
	if err := w.catacomb.Add(watcher); err != nil {
		return err
	}
	ctx := w.catacomb.Context(context.Background())
	// Never more than Concurrency + AwaitConcurrency reconciles are in flight, each sending
	// at most twice (awaiting, then its outcome), so their sends never block, even after the
	// loop has stopped reading. One channel keeps a reconcile's two sends in order.
	done := make(chan outcome, 2*(w.config.Concurrency+w.config.AwaitConcurrency))
	s := newSchedule()
	sh := &sharing{isLeft: make(map[string]bool)}
	w.refreshAgents(ctx, sh, w.config.Clock.Now(), w.config.ShareGrace)
	owners := &ownerPolicies{}
	limit := newConcurrencyLimit(w.config.MinConcurrency, w.config.Concurrency)
	var alarm clock.Alarm
	var alarmAt time.Time
	defer func() {
		if alarm != nil {
			alarm.Stop()
		}
	}()
	for {
		w.refreshOwners(ctx, s, owners, w.config.Clock.Now())
		s.due(w.config.Clock.Now())
		if at, ok := sh.nextLeft(); ok && !at.After(w.config.Clock.Now()) {
			w.takeUp(ctx, s, sh)
		}
		for {
			id, woken, ok := s.start(limit.current(), w.config.AwaitConcurrency)
			if !ok {
				break
			}
			running.Add(1)
			go func() {
				defer running.Done()
				awaiting := func() { done <- outcome{id: id, awaiting: true} }
				done <- w.reconcile(ctx, id, woken, awaiting)
			}()
		}
		w.refreshAgents(ctx, sh, w.config.Clock.Now(), w.config.ShareGrace)
		// One alarm, for the earliest retry or look at what was left to other agents.
		var alarmC <-chan time.Time
		if at, ok := earliest(s.nextRetry, sh.nextLeft); ok {
			if alarm == nil || !at.Equal(alarmAt) {
				if alarm != nil {
					alarm.Stop()
				}
				alarm, alarmAt = w.config.Clock.NewAlarm(at), at
			}
			alarmC = alarm.Chan()
		} else if alarm != nil {
			alarm.Stop()
			alarm = nil
		}
		w.publish(s, sh, owners, limit.current())

		changes := watcher.Changes()
		if s.queueDepth() >= queueHighWater || len(sh.left) >= leftHighWater {
			changes = nil
		}
		select {
		case <-w.catacomb.Dying():
			return w.catacomb.ErrDying()
		case batch, ok := <-changes:
			if !ok {
				return errors.New("resources watcher stopped unexpectedly")
			}
			w.route(ctx, s, sh, batch)
		case o := <-done:
			if o.awaiting {
				s.await(o.id)
			} else {
				limit.ended(w.config.Clock.Now(), s.queueDepth(), s.inFlight())
				s.finish(o)
			}
		case <-alarmC:
			alarm = nil
		}
	}
}

// publish makes the loop's state the report's and the queue metrics'. The loop publishes
// after every outcome, thousands a second under a burst, on the one goroutine that starts
// every reconcile: so the owners' depths are kept as they are, in maps filled again in place,
// and sorted only when Report asks (sorting them each time took a tenth of the agent's CPU),
// and the report is a value, made into a map only when asked for.
func (w *Worker) publish(s *schedule, sh *sharing, owners *ownerPolicies, limit int) {
	report := loopReport{
		published:          true,
		queueDepth:         s.queueDepth(),
		queuedOwners:       s.queue.Owners(),
		inFlight:           s.inFlight(),
		concurrencyLimit:   limit,
		awaitingReady:      s.awaitingReady(),
		waitingForCapacity: s.waitingForCapacity(),
		waitingForQuota:    s.waitingForQuota(),
		waitingForBroker:   s.waitingForBroker(),
		scheduledRetries:   s.scheduledRetries(),
		leftToOwners:       len(sh.left),
		sharingWith:        len(sh.agents) - 1,
	}
	if at, ok := s.nextRetry(); ok {
		report.nextRetryAt = at
	}
	w.mu.Lock()
	w.report = report
	s.queueDepthsInto(w.depths)
	w.mu.Unlock()
	w.depthByClassInto(w.classDepths, w.depths, owners)
	w.config.Metrics.ObserveQueue(w.classDepths, report.inFlight)
}

// earliest returns the earlier of two optional times.
func earliest(a, b func() (time.Time, bool)) (time.Time, bool) {
	ta, okA := a()
	tb, okB := b()
	switch {
	case okA && okB && tb.Before(ta):
		return tb, true
	case okA:
		return ta, true
	default:
		return tb, okB
	}
}

// now returns the worker's time at the precision the database keeps, so that a retry time
// read back from a row equals the one the worker scheduled.
func (w *Worker) now() time.Time {
	return w.config.Clock.Now().Truncate(time.Microsecond)
}

// retryPolicy is the policy the worker's settings make.
func (w *Worker) retryPolicy() retryPolicy {
	return retryPolicy{base: w.config.BackoffBase, max: w.config.BackoffMax, capacityRetry: w.config.CapacityRetry, rand: w.config.Rand}
}
