package healthcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/catacomb"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/clocktimeout"
	"github.com/berth-dev/berth/internal/inflight"
	"github.com/berth-dev/berth/internal/rendezvous"
	"github.com/berth-dev/berth/metrics"
)

// Store is the part of domain.State the worker uses.
type Store interface {
	CountResourcesByStatus(ctx context.Context) (map[domain.Status]int, error)
	ListCheckable(ctx context.Context, afterID string, limit int, holder string) ([]domain.Resource, error)
	RecordHealth(ctx context.Context, id string, checked domain.Checked, h domain.HealthUpdate) (domain.Resource, error)
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
	ResultError     = "error"     // the check could not be made (provisioner unknown) or recorded
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

// recordTimeout bounds the write of one check's outcome.
const recordTimeout = 10 * time.Second

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

// Report shows the current round, the one before it and the last errors reading and
// recording.
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
	return report
}

// loop runs rounds, then cancels and waits for every check it started.
func (w *Worker) loop() error {
	return inflight.Run(&w.catacomb, w.run)
}

// round is the loop's cursor through one round.
type round struct {
	seq       int
	start     time.Time
	end       time.Time            // start + Interval: no check of the round is due later
	agents    []string             // the live agents, sorted, this one among them
	expected  int                  // checks the round expects to make, for pacing
	index     int                  // checks dispatched so far
	slotStart time.Time            // where the next check's slot begins
	lastDue   time.Time            // when the check drawn last was due
	page      []domain.Resource    // the current page, from pos on not yet dispatched
	prepared  map[string]*prepared // the current page's prepared checks, by provisioner
	pos       int
	after     string    // the last id read
	headDue   time.Time // when page[pos] is due; zero until drawn
	deferred  int       // resources read that were created after the round started
	read      int       // resources read that were created before: of every agent's share
	own       int       // of those, the ones in this agent's share
	// ownDeferred are the deferred resources of this agent's share, for the report.
	ownDeferred int
	exhausted   bool // every page read
}

// mine reports whether the resource id is in the share of self, the agent running the
// round: whether it is id's rendezvous owner among the round's agents.
func (r *round) mine(self, id string) bool {
	return len(r.agents) == 1 || rendezvous.Owner(r.agents, id) == self
}

// drawHeadDue places page[pos] at a random point of its slot. The time left until the round
// ends is shared evenly among the checks still expected (at least the rest of the page), so
// the pace adapts when more resources turn up than were counted, and no check is due after
// the round's end.
func (r *round) drawHeadDue(rand float64) {
	left := max(r.expected-r.index, len(r.page)-r.pos, 1)
	slot := r.end.Sub(r.slotStart) / time.Duration(left)
	r.headDue = r.slotStart.Add(time.Duration(rand * float64(slot)))
	r.lastDue = r.headDue
	r.slotStart = r.slotStart.Add(slot)
}

// checkDone is what a resource check tells the loop.
type checkDone struct {
	round       int    // the seq of the round that started the check
	skipped     bool   // the resource was being reconciled; the next round checks it
	failed      bool   // CheckResource failed
	result      string // Result*, for Metrics
	recordError error
}

// prepared are the checks an environ prepared for the resources of one page.
type prepared struct {
	env    environ.Environ
	checks environ.PreparedChecks
}

// current reports whether env is still the environ that prepared the checks: the provisioner
// set may have been replaced since the page was read.
func (p *prepared) current(env environ.Environ) bool {
	return p != nil && reflect.TypeOf(env).Comparable() && env == p.env
}

func (w *Worker) run(running *sync.WaitGroup) error {
	ctx := w.catacomb.Context(context.Background())
	// Sends never block: at most Concurrency checks are in flight.
	checks := make(chan checkDone, w.config.Concurrency)
	inFlight := 0

	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
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

		if timer != nil {
			timer.Stop()
			timer = nil
		}
		var timerC <-chan time.Time
		if !wake.IsZero() {
			// Measured afresh: the clock may have moved while this iteration ran.
			timer = w.config.Clock.NewTimer(wake.Sub(w.config.Clock.Now()))
			timerC = timer.Chan()
		}

		select {
		case <-w.catacomb.Dying():
			return w.catacomb.ErrDying()
		case <-timerC:
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
	if done.recordError != nil {
		w.lastRecordError = done.recordError.Error()
	}
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

// startRound reads the live agents, counts the checkable resources and returns the new
// round's cursor. Until its pages say otherwise the round expects an even share of the
// resources: rendezvous owners are spread evenly.
func (w *Worker) startRound(ctx context.Context, seq int, now time.Time, previous []string) *round {
	agents := w.liveAgents(ctx)
	if previous != nil && !slices.Equal(agents, previous) {
		w.config.Logger.Info("health checks are now shared among these agents", "agents", agents, "previous", previous)
	}
	expected := w.config.PageSize
	if n, err := w.countCheckable(ctx); err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot count resources; pacing this round's checks by page size", "error", err)
		}
	} else {
		expected = (n + len(agents) - 1) / len(agents)
	}
	r := &round{seq: seq, start: now, end: now.Add(w.config.Interval), agents: agents, expected: expected, slotStart: now}
	w.mu.Lock()
	w.lastRound = w.round
	w.round = roundStats{seq: seq, started: now, ends: r.end, agents: len(agents), resources: expected}
	w.mu.Unlock()
	return r
}

// liveAgents returns the ids of the live agents, sorted. This agent's own id is among them
// even when its row is not listed live (it has just started, or its heartbeat is late), so
// that its share is checked by someone: at worst by it and by another agent for a round.
// When the agents cannot be listed it returns this agent alone, so that the round checks
// every resource rather than none. Without Agents it is alone.
func (w *Worker) liveAgents(ctx context.Context) []string {
	self := w.config.Agent.ID
	if w.config.Agents == nil {
		return []string{self}
	}
	listed, err := w.config.Agents.ListAgents(ctx, w.config.Agent.TTL)
	if err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot list the live agents; this round checks every resource, other agents' shares too", "error", err)
			w.mu.Lock()
			w.lastAgentsError = err.Error()
			w.mu.Unlock()
		}
		return []string{self}
	}
	return domain.LiveAgentIDs(listed, self)
}

// countCheckable counts the resources that are ready or unhealthy.
func (w *Worker) countCheckable(ctx context.Context) (int, error) {
	counts, err := w.config.Store.CountResourcesByStatus(ctx)
	if err != nil {
		return 0, err
	}
	return counts[domain.StatusReady] + counts[domain.StatusUnhealthy], nil
}

// nextPage reads the page after r.after and keeps the resources of this agent's share,
// leaving out those created after the round started (the next round checks them); an empty
// page, or an error, ends the round's checks. A page that takes the round past the checks it
// expected counts the resources again, so that the round's pace adapts.
func (w *Worker) nextPage(ctx context.Context, r *round) {
	page, err := w.config.Store.ListCheckable(ctx, r.after, w.config.PageSize, w.config.Agent.ID)
	if err != nil {
		r.exhausted = true
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot list resources to check; the next round starts over", "error", err)
			w.mu.Lock()
			w.lastListError = err.Error()
			w.mu.Unlock()
		}
		return
	}
	if len(page) == 0 {
		w.readAll(r)
		return
	}
	r.after = page[len(page)-1].ID
	eligible := page[:0]
	for _, res := range page {
		mine := r.mine(w.config.Agent.ID, res.ID)
		if res.CreatedAt.After(r.start) {
			r.deferred++
			if mine {
				r.ownDeferred++
			}
			continue
		}
		r.read++
		if mine {
			r.own++
			eligible = append(eligible, res)
		}
	}
	r.page, r.pos = eligible, 0
	if r.index+len(eligible) > r.expected {
		w.recount(ctx, r)
	}
	w.mu.Lock()
	w.round.deferred = r.ownDeferred
	w.round.share = r.own
	w.round.resources = r.expected
	w.mu.Unlock()
	r.prepared = w.prepare(ctx, eligible)
}

// recount raises the checks r expects to those of its share read so far plus its share of
// the resources checkable now that it has not read yet, less those it has already left for
// the next round. The share of those not read is taken to be the share of those read (all
// of them for one agent). Resources created since the round started but not read yet are
// counted too, so the estimate errs on the side of a faster pace: the round ends early
// rather than late. The slots handed out so far were shared among too few checks, so what
// is left of them after the last check's due time is shared again. It is called with
// resources read (r.read > 0).
func (w *Worker) recount(ctx context.Context, r *round) {
	n, err := w.countCheckable(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Debug("cannot count resources again; pacing the round by what it has read", "error", err)
		}
		return
	}
	unread := max(n-r.deferred-r.read, 0)
	expected := r.own + (unread*r.own+r.read-1)/r.read
	if expected <= r.expected {
		return
	}
	r.expected = expected
	if !r.lastDue.IsZero() {
		r.slotStart = r.lastDue
	}
}

// readAll notes that every page of r is read, and warns when that came well after the
// round's end (by more than a tenth of the interval): its last checks were dispatched late,
// because checks take too long for the concurrency.
func (w *Worker) readAll(r *round) {
	r.exhausted = true
	if late := w.config.Clock.Now().Sub(r.end); late > w.config.Interval/10 {
		w.config.Logger.Warn("health-check round ran past its interval: its last checks were late; raise the concurrency or the interval",
			"interval", w.config.Interval, "late", late, "checks", r.index, "concurrency", w.config.Concurrency)
	}
}

// prepare lets each environ of the page that can prepare its resources' checks at once do so.
// An environ that fails to has its resources checked one at a time.
func (w *Worker) prepare(ctx context.Context, page []domain.Resource) map[string]*prepared {
	var names []string
	ids := make(map[string][]string)
	for _, r := range page {
		if _, seen := ids[r.Provisioner]; !seen {
			names = append(names, r.Provisioner)
		}
		ids[r.Provisioner] = append(ids[r.Provisioner], r.ID)
	}
	out := make(map[string]*prepared)
	for _, name := range names {
		env, _, err := w.config.Environs.Get(name)
		if err != nil {
			continue // each check reports it
		}
		preparer, ok := env.(environ.CheckPreparer)
		if !ok {
			continue
		}
		prepCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, w.config.CheckTimeout)
		checks, err := preparer.PrepareChecks(prepCtx, ids[name])
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.config.Logger.Warn("cannot prepare a page of checks; checking its resources one at a time",
					"provisioner", name, "resources", len(ids[name]), "error", err)
			}
			continue
		}
		out[name] = &prepared{env: env, checks: checks}
	}
	return out
}

// check health-checks one resource (through prep, the checks prepared for its page, if any),
// records what changed and counts the result; a check cut short by the worker stopping, or
// skipped, is not counted.
func (w *Worker) check(ctx context.Context, r domain.Resource, prep *prepared) checkDone {
	done := w.checkResource(ctx, r, prep)
	if ctx.Err() == nil && !done.skipped {
		w.config.Metrics.ObserveHealthCheck(w.provisionerLabel(r.Provisioner), done.result)
	}
	return done
}

// provisionerLabel is the provisioner a resource's check is counted under: its name in the
// provisioner set, or metrics.Unknown for a name the set does not have, so that rows naming
// made-up provisioners add no series.
func (w *Worker) provisionerLabel(name string) string {
	if _, canonical, err := w.config.Environs.Get(name); err == nil {
		return canonical
	}
	return metrics.Unknown
}

// checkResource health-checks one resource and records what changed.
func (w *Worker) checkResource(ctx context.Context, r domain.Resource, prep *prepared) checkDone {
	log := w.config.Logger.With("id", r.ID, "provisioner", r.Provisioner, "generation", r.Generation)
	if !r.Readable() {
		return w.recordUnreadable(ctx, log, r)
	}
	env, _, err := w.config.Environs.Get(r.Provisioner)
	if err != nil {
		log.Debug("cannot health-check resource: its provisioner is not in the provisioner set", "error", err)
		return checkDone{result: ResultError}
	}
	var checker environ.PreparedChecks = env
	if prep.current(env) {
		checker = prep.checks
	}
	// Held until the outcome is recorded, so that no reconcile starts between the check and
	// its record.
	unlock, ok := w.config.Locks.TryLock(r.ID)
	if !ok {
		log.Debug("resource is being reconciled; skipping its check this round")
		return checkDone{skipped: true}
	}
	defer unlock()
	// What the check's writes carry: the store applies them only while the row is still as
	// it was read here, whatever happened to it since (a hibernate, a wake, a delete).
	checked := r.CheckedBy(w.config.Agent.ID)
	checkCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, w.config.CheckTimeout)
	res, checkErr := checker.CheckResource(checkCtx,
		&environ.Resource{ID: r.ID, Type: r.Type, State: r.State, Config: r.Config, Checked: &checked},
		&environ.ResourceOptions{Name: r.Name, Owner: r.Owner, Args: r.Args, Generation: r.Generation, Labels: r.Labels})
	if checkErr != nil && checkCtx.Err() != nil {
		checkErr = fmt.Errorf("%w (%v)", checkErr, context.Cause(checkCtx))
	}
	cancel()
	if ctx.Err() != nil {
		return checkDone{}
	}
	if errors.Is(checkErr, domain.ErrStale) || errors.Is(checkErr, domain.ErrNotFound) {
		// The store refused a repair (or the environ found before one) that the row moved
		// on (another generation, deleting, paused, hibernating, claimed since, gone): what
		// the check found is not the resource's any more, and nothing is recorded.
		log.Debug("resource changed while it was checked; nothing recorded", "error", checkErr)
		return checkDone{skipped: true}
	}

	u := w.outcome(r, res, checkErr)
	found := checkDone{failed: checkErr != nil, result: ResultHealthy}
	switch {
	case checkErr != nil:
		found.result = ResultUnhealthy
	case len(u.Repairs) > 0:
		found.result = ResultRepaired
	}
	if u.Status == r.Status && u.StatusMessage == r.StatusMessage && u.State == nil && u.Config == nil && len(u.Repairs) == 0 {
		return found
	}
	recordCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, recordTimeout)
	defer cancel()
	_, err = w.config.Store.RecordHealth(recordCtx, r.ID, checked, u)
	switch {
	case errors.Is(err, domain.ErrStale) || errors.Is(err, domain.ErrNotFound):
		log.Debug("resource changed while it was checked; dropping the result", "error", err)
		return found
	case err != nil:
		if ctx.Err() == nil {
			log.Warn("cannot record the health check; the next round checks again", "error", err)
		}
		return checkDone{failed: found.failed, result: ResultError, recordError: err}
	}
	for _, repair := range u.Repairs {
		log.Info("repaired resource", "repair", repair)
	}
	switch {
	case u.Status == domain.StatusUnhealthy && r.Status != domain.StatusUnhealthy:
		log.Warn("resource is unhealthy", "error", checkErr)
	case u.Status == domain.StatusReady && r.Status == domain.StatusUnhealthy:
		log.Info("resource is healthy again")
	}
	return found
}

// recordUnreadable records a row whose columns Berth cannot decode (written by another
// program) as error, saying which column and why, instead of checking it with what could not
// be read. The record hands the row to the provisioner, which looks at it again until it is
// fixed; until then it is no longer checkable.
func (w *Worker) recordUnreadable(ctx context.Context, log *slog.Logger, r domain.Resource) checkDone {
	unlock, ok := w.config.Locks.TryLock(r.ID)
	if !ok {
		return checkDone{skipped: true}
	}
	defer unlock()
	recordCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, recordTimeout)
	defer cancel()
	message := r.UnreadableReason() + ": fix the column with SQL or delete the resource"
	_, err := w.config.Store.RecordHealth(recordCtx, r.ID, r.CheckedBy(w.config.Agent.ID), domain.HealthUpdate{Status: domain.StatusError, StatusMessage: message})
	switch {
	case errors.Is(err, domain.ErrStale) || errors.Is(err, domain.ErrNotFound):
		log.Debug("unreadable resource changed meanwhile; leaving it to the next round", "error", err)
	case err != nil:
		if ctx.Err() == nil {
			log.Warn("cannot record an unreadable resource as error; the next round tries again", "error", err)
		}
		return checkDone{result: ResultError, recordError: err}
	default:
		log.Warn("resource row is unreadable; recorded as error", "reason", r.UnreadableReason())
	}
	return checkDone{result: ResultError}
}

// outcome is what a check of r that gave res and checkErr records.
func (w *Worker) outcome(r domain.Resource, res *environ.Resource, checkErr error) domain.HealthUpdate {
	now := w.now()
	var u domain.HealthUpdate
	if checkErr != nil {
		since := now
		if r.Status == domain.StatusUnhealthy && r.UnhealthySince != nil {
			since = *r.UnhealthySince
		}
		u.Status = domain.StatusUnhealthy
		u.UnhealthySince = since
		u.StatusMessage = fmt.Sprintf("health check failing since %s: %v", since.UTC().Format(time.RFC3339), checkErr)
	} else {
		u.Status = domain.StatusReady
		u.StatusMessage = r.StatusMessage
		if r.Status == domain.StatusUnhealthy {
			u.StatusMessage = fmt.Sprintf("ready at generation %d: health check passing again since %s", r.Generation, now.UTC().Format(time.RFC3339))
			if r.UnhealthySince != nil {
				u.StatusMessage += fmt.Sprintf(" (failed since %s)", r.UnhealthySince.UTC().Format(time.RFC3339))
			}
		}
	}
	if res != nil {
		if res.State != nil && !sameJSON(res.State, r.State) {
			u.State = res.State
		}
		if res.Config != nil && !sameJSON(res.Config, r.Config) {
			u.Config = res.Config
		}
		u.Repairs = res.Repairs
	}
	return u
}

// sameJSON reports whether a and b are stored as the same JSON: a broker's ints equal the
// float64s read back from the database.
func sameJSON(a, b map[string]any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	var na, nb any
	if json.Unmarshal(ja, &na) != nil || json.Unmarshal(jb, &nb) != nil {
		return false
	}
	return reflect.DeepEqual(na, nb)
}

// now returns the worker's time at the precision the database keeps.
func (w *Worker) now() time.Time {
	return w.config.Clock.Now().Truncate(time.Microsecond)
}
