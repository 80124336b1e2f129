package provisioner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	jujuerrors "github.com/juju/errors"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/clocktimeout"
	"github.com/berth-dev/berth/internal/logging"
	"github.com/berth-dev/berth/metrics"
)

// outcome is what one reconcile tells the loop about when to come back to the resource.
type outcome struct {
	id         string
	requeue    bool      // reconcile again at once: the row moved on under the attempt
	retryAt    time.Time // zero: no retry
	waitingFor string    // the provisioner the resource waits on (capacity, quota or its broker)
	// waitingReason is why it waits on waitingFor: one of domain.WaitingReasons.
	waitingReason domain.Reason
	freed         string // the provisioner on which a deprovision freed capacity
	result        string // Outcome* for Metrics; "" when the attempt did nothing to report
	// awaiting says the reconcile is not over but waits for its resource to serve: it
	// gives its place back. Nothing else of the outcome is set.
	awaiting bool
}

// reconcile claims resource id, brings it one step closer to its desired state and releases
// it. ctx ends when the worker is killed. woken says capacity was freed for the resource, so
// a wait for capacity ends early.
//
// The attempt holds the resource's lock from before the claim to after the release, so no
// health check of this agent runs meanwhile; it waits for one in flight to end first (a
// check is bounded by its own timeout). The wait counts against neither the attempt's
// timeout nor its lease.
func (w *Worker) reconcile(ctx context.Context, id string, woken bool, awaiting func()) outcome {
	unlock, err := w.config.Locks.Lock(ctx, id)
	if err != nil {
		// The worker is stopping: the next agent (or this one, restarted) carries on.
		return outcome{id: id}
	}
	defer unlock()
	started := w.config.Clock.Now()
	ctx, span := w.tracer.Start(ctx, SpanReconcile, trace.WithAttributes(AttrResourceID.String(id)))
	attemptCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, w.config.ReconcileTimeout)
	base := logging.WithSpan(ctx, w.config.Logger)
	a := &attempt{w: w, ctx: ctx, attemptCtx: attemptCtx, base: base, log: base.With("id", id), awaiting: awaiting}
	a.r.ID = id
	o := a.run(woken)
	o.id = id
	if a.closedBreaker != "" && o.freed == "" {
		// The attempt's probe closed its broker's breaker: what waits for it goes on.
		o.freed = a.closedBreaker
	}
	cancel()
	if o.result != "" {
		w.config.Metrics.ObserveReconcile(a.metricsProvisioner(), a.r.Type, o.result, w.config.Clock.Now().Sub(started))
	}
	if a.holdsLease {
		a.release()
	}
	a.endSpan(span, o)
	return o
}

// attempt is one reconcile of one resource.
type attempt struct {
	w          *Worker
	ctx        context.Context // the worker's: ends when it is killed
	attemptCtx context.Context // ctx bounded by ReconcileTimeout
	base       *slog.Logger    // the worker's, with the attempt's trace and span ids
	log        *slog.Logger
	holdsLease bool
	lease      domain.Lease    // the claim's: every write of the attempt carries it
	started    bool            // the claim recorded the start of provisioning
	r          domain.Resource // the row as last read or written
	// claimed is the row's quota admission as the claim read it.
	claimed     domain.ClaimedAdmission
	provisioner string // the canonical provisioner name, once resolved
	// hibernating says the attempt asks the environ to hibernate the resource: a failure
	// keeps it hibernating and is retried.
	hibernating bool
	// serving says the resource was ready (at its observed generation) when the attempt
	// began: a broker with no room for its new args changed nothing, so it still serves. An
	// unhealthy one is not: the health checker leaves out a resource whose generation is
	// ahead of its observed one, so nothing would say it is still failing.
	serving bool
	// passed is a step the attempt went through without a write of its own: the next
	// record writes it into the resource's history first.
	passed *domain.StatusStep
	// awaiting tells the worker the attempt waits for its resource to serve.
	awaiting func()
	// failure is why the attempt failed, for its span's status; nil when it did not.
	failure error
	// closedBreaker is the provisioner whose breaker the attempt's probe closed.
	closedBreaker string
	// deferredAdmission is the admission of an owner without a quota, which the attempt's
	// next record writes (domain.ErrAdmissionDeferred); nil when there is none to write.
	deferredAdmission *domain.Admission
}

func (a *attempt) run(woken bool) outcome {
	if o, done := a.instant(); done {
		return o
	}
	c, err := a.claim()
	var held *domain.LeaseHeldError
	switch {
	case err == nil:
	case errors.Is(err, domain.ErrNotFound):
		return outcome{}
	case errors.As(err, &held) && held.LiveAgent:
		// The resource is that agent's work: looking again would only fight it for the row.
		// The watcher hands it back should that agent die or leave it overdue.
		a.log.Debug("another live agent is reconciling the resource; leaving it to that agent", "holder", held.Holder)
		return outcome{}
	case errors.As(err, &held):
		a.log.Debug("another agent holds the resource's lease", "holder", held.Holder, "expires", held.ExpiresAt)
		return outcome{retryAt: a.leaseRetry(held.ExpiresAt)}
	case a.ctx.Err() != nil:
		return outcome{}
	default:
		delay := a.w.retryPolicy().backoff(1)
		a.log.Warn("cannot claim resource; retrying", "error", err, "retry-in", delay)
		a.failure = fmt.Errorf("claim: %w", err)
		return outcome{retryAt: a.w.now().Add(delay), result: OutcomeRetry}
	}
	a.holdsLease = true
	a.lease = c.Lease
	a.started = c.Started
	a.claimed = c.Admission
	a.r = c.Resource
	r := c.Resource
	a.resolved(r.Provisioner)
	if t := c.Takeover; t != nil {
		// The previous holder stopped (or paused) mid-attempt: its later writes are fenced.
		a.log.Info(fmt.Sprintf("took over resource from %s after %s", t.PreviousHolder, t.Waited.Round(time.Millisecond)),
			"previous-holder", t.PreviousHolder, "waited", t.Waited)
		a.w.config.Metrics.ObserveLeaseTakeover(a.metricsProvisioner())
	}

	if r.Paused {
		// A paused resource is left exactly as it is, delete requests included: resuming
		// it logs a change, and the agent takes it up then.
		a.log.Debug("resource is paused; leaving it until it is resumed", "status", r.Status)
		return outcome{}
	}
	wokenForCapacity := woken && (r.Status == domain.StatusPending || resizeWaiting(r) || r.Reason == domain.ReasonBrokerUnavailable)
	if wait := a.untilDue(r); wait > 0 && !wokenForCapacity {
		a.log.Debug("retry not due yet", "status", r.Status, "next-attempt-at", *r.NextAttemptAt, "retry-in", wait)
		o := outcome{retryAt: a.w.now().Add(wait)}
		if (r.Status == domain.StatusPending || resizeWaiting(r) || r.Reason == domain.ReasonBrokerUnavailable) && r.Provisioner != "" {
			o.waitingFor, o.waitingReason = r.Provisioner, r.Reason
		}
		return o
	}
	switch {
	case r.Status == domain.StatusDeleting:
		// Brokers free what a resource holds by its id: an unreadable column cannot keep a
		// delete from finishing.
		return a.deprovision()
	case !r.Readable():
		return a.fail(&unreadableError{r.UnreadableReason()})
	case r.Status == domain.StatusError && r.LastError != "" && r.NextAttemptAt == nil:
		a.log.Debug("permanent failure at this generation; waiting for new args, a retry request or a wake")
		return outcome{}
	case r.Hibernate && r.Status == domain.StatusHibernated:
		return outcome{}
	case r.Hibernate:
		return a.hibernate()
	case r.Status == domain.StatusHibernated || r.Status == domain.StatusHibernating:
		return a.provision()
	case r.UpToDate():
		return outcome{}
	}
	return a.provision()
}

// claim takes the resource's lease. When the agent has a default provisioner, the claim also
// records the start of provisioning of a row nothing has been done to yet that the default
// provisioner provisions (pending, no status message, no retry scheduled): the record
// provision would make first, made in the same write. Claim.Started says it was made.
func (a *attempt) claim() (domain.Claim, error) {
	cfg := a.w.config
	env, name, err := cfg.Environs.Get("")
	if err != nil {
		return cfg.State.ClaimResource(a.attemptCtx, a.r.ID, cfg.Agent.ID, cfg.LeaseTTL)
	}
	start := domain.ProvisioningStart{Provisioner: name, Types: cfg.Environs.ServedTypes(env)}
	return cfg.State.ClaimAndStart(a.attemptCtx, a.r.ID, cfg.Agent.ID, cfg.LeaseTTL, start)
}

// provision brings the resource to ready at its current generation.
func (a *attempt) provision() outcome {
	cfg := a.w.config
	env, name, err := cfg.Environs.Get(a.r.Provisioner)
	if err != nil {
		return a.fail(environ.Permanent(err))
	}
	if !env.Supports(a.r.Type) {
		// A type no environ of the agent serves (a row written with plain SQL) says so, naming
		// the served types; *environ.UnknownTypeError is permanent.
		if err := cfg.Environs.CheckType(a.r.Type); err != nil {
			return a.fail(err)
		}
		return a.fail(environ.Permanent(fmt.Errorf(
			"provisioner %q (%s) does not provision resources of type %q: choose a provisioner that does", name, env.Type(), a.r.Type)))
	}
	a.resolved(name)
	gen := a.r.Generation
	// Waking is provisioning: the environ's Reconcile brings back what Hibernate kept.
	waking := a.r.Status == domain.StatusHibernated || a.r.Status == domain.StatusHibernating
	step := domain.ProvisioningMessage(gen)
	if waking {
		step = wakingMessage(gen)
	}

	u := domain.ProgressUpdate{
		Generation:    gen,
		Status:        domain.StatusProvisioning,
		Reason:        domain.ReasonProvisioning,
		StatusMessage: step,
		Attempts:      a.r.Attempts,
		LastError:     a.r.LastError,
	}
	if a.r.Provisioner == "" {
		u.Provisioner = name
	}
	a.serving = !waking && a.r.ObservedGeneration > 0 && a.r.Status == domain.StatusReady
	if err := a.brokerAdmits(name); err != nil {
		return a.fail(err)
	}
	if a.started {
		// The claim recorded u already.
		a.log.Info("provisioning")
	} else if (a.waitingForCapacity() || resizeWaiting(a.r)) && u.Provisioner == "" {
		// A retry for capacity stays pending (or ready, serving its old size) until the
		// broker finds room: recording provisioning first would flip the row, and its
		// history, on every retry.
		a.log.Debug("retrying a resource waiting for capacity")
	} else {
		a.log.Info(step)
		if err := a.record(a.attemptCtx, u); err != nil {
			return a.fail(err)
		}
	}

	units, admitted, err := a.admit(env, false)
	if err != nil {
		return a.fail(err)
	}
	ctx, end := a.environSpan(SpanEnvironReconcile, env)
	res, err := env.Reconcile(ctx, a.environResource(), a.options())
	end(err)
	if err = a.brokerAnswered(name, err); err != nil {
		return a.fail(fmt.Errorf("reconcile: %w", err))
	}
	if admitted > units {
		// The broker applied a shrink: the owner's usage drops now, not before.
		if _, _, err := a.admit(env, true); err != nil {
			return a.fail(err)
		}
	}
	// Save the broker's state before waiting: if the agent dies now, the next attempt hands
	// it back instead of starting from what the broker may already have replaced. A broker
	// that keeps it itself hands back the same, so the wait is recorded with the next write.
	u.Reason = domain.ReasonAwaitingReady
	u.StatusMessage = step + ": waiting for it to serve"
	u.Provisioner = ""
	u.State = orEmpty(res.State)
	if res.Kept {
		a.passed = &domain.StatusStep{Status: u.Status, Reason: u.Reason, Message: u.StatusMessage}
	} else {
		if err := a.record(a.attemptCtx, u); err != nil {
			return a.fail(err)
		}
		// The wait can be long (a rollout): another resource may be applied meanwhile.
		a.awaiting()
	}

	ctx, end = a.environSpan(SpanEnvironAwaitReady, env)
	err = env.AwaitReady(ctx, res)
	end(err)
	if err = a.brokerAnswered(name, err); err != nil {
		return a.fail(fmt.Errorf("await ready: %w", err))
	}
	message := domain.ReadyMessage(gen, res.Notice)
	firstReady := a.r.ReadyAt == nil
	err = a.record(a.attemptCtx, domain.ProgressUpdate{
		Generation:         gen,
		Status:             domain.StatusReady,
		Reason:             domain.ReasonAvailable,
		StatusMessage:      message,
		State:              orEmpty(res.State),
		Config:             orEmpty(res.Config),
		ObservedGeneration: &gen,
		ReleaseLease:       true,
	})
	if err != nil {
		return a.fail(err)
	}
	a.log.Info("ready")
	if firstReady && a.r.ReadyAt != nil {
		a.w.config.Metrics.ObserveCreateToReady(a.metricsProvisioner(), a.r.Type, a.r.ReadyAt.Sub(a.r.CreatedAt))
	}
	return outcome{result: OutcomeReady}
}

// hibernate asks the resource's environ to stop it while keeping its data and identity, and
// records it hibernated with the state the environ returns (its config is kept for the wake).
// A resource nothing was provisioned for (no provisioner pinned, no broker state) has
// nothing to stop: it is recorded hibernated at once. An environ that cannot hibernate is a
// permanent failure, whose message says how to get out of it.
func (a *attempt) hibernate() outcome {
	cfg := a.w.config
	gen := a.r.Generation
	done := domain.ProgressUpdate{
		Generation:    gen,
		Status:        domain.StatusHibernated,
		Reason:        domain.ReasonHibernated,
		StatusMessage: fmt.Sprintf("hibernated at generation %d", gen),
		ReleaseLease:  true,
	}
	if a.r.Provisioner == "" && len(a.r.State) == 0 {
		return a.hibernated(done)
	}
	env, name, err := cfg.Environs.Get(a.r.Provisioner)
	if err != nil {
		return a.fail(environ.Permanent(err))
	}
	a.resolved(name)
	hibernator, ok := env.(environ.Hibernator)
	if !ok {
		return a.fail(environ.Permanent(cannotHibernate(name, env.Type(), a.r.ID)))
	}
	a.hibernating = true
	if err := a.brokerAdmits(name); err != nil {
		return a.fail(err)
	}
	if a.r.Status != domain.StatusHibernating || a.r.Reason != domain.ReasonHibernating {
		a.log.Info("hibernating")
		err := a.record(a.attemptCtx, domain.ProgressUpdate{
			Generation:    gen,
			Status:        domain.StatusHibernating,
			Reason:        domain.ReasonHibernating,
			StatusMessage: hibernatingMessage(gen),
			Attempts:      a.r.Attempts,
			LastError:     a.r.LastError,
		})
		if err != nil {
			return a.fail(err)
		}
	}
	ctx, end := a.environSpan(SpanEnvironHibernate, env)
	res, err := hibernator.Hibernate(ctx, a.environResource(), a.options())
	end(err)
	if err = a.brokerAnswered(name, err); err != nil {
		return a.fail(fmt.Errorf("hibernate: %w", err))
	}
	done.State = orEmpty(res.State)
	return a.hibernated(done)
}

// cannotHibernate is the NotSupported error of provisioner name, of environ type envType,
// which has no environ.Hibernator: it says how to get resource id out of hibernating.
func cannotHibernate(name, envType, id string) error {
	return jujuerrors.NewNotSupported(fmt.Errorf(
		"provisioner %q (%s) cannot hibernate resources: wake the resource (berth resource wake %s) or delete it", name, envType, id), "")
}

// hibernated records the end of a hibernate.
func (a *attempt) hibernated(u domain.ProgressUpdate) outcome {
	if err := a.record(a.attemptCtx, u); err != nil {
		return a.fail(err)
	}
	a.log.Info("hibernated")
	return outcome{result: OutcomeHibernated}
}

// Admitter admits resources against their owners' quotas (domain.QuotaStore; both stores
// are one). A State without it admits everything.
type Admitter interface {
	AdmitResource(ctx context.Context, id string, lease domain.Lease, a domain.Admission) (int64, error)
}

// admit admits the resource, at its size on env (environ.Sizer; 0 when env cannot tell), on
// its provisioner before env provisions or grows it, and returns its size and the units it
// is admitted at. With lower, an admission at more units is lowered to its size: the broker
// applied a shrink. A quota the admission would exceed gives a *domain.QuotaExceededError,
// which the retry policy makes a wait.
func (a *attempt) admit(env environ.Environ, lower bool) (units, admitted int64, err error) {
	admitter, ok := a.w.config.State.(Admitter)
	if !ok {
		return 0, 0, nil
	}
	if sizer, ok := env.(environ.Sizer); ok {
		if units, err = sizer.Units(a.environResource(), a.options()); err != nil {
			return 0, 0, fmt.Errorf("size: %w", err)
		}
	}
	if !lower && a.claimed.Provisioner == a.provisioner && a.claimed.Units >= units {
		// Admitted at this size already when claimed: only the attempt writes admissions.
		return units, a.claimed.Units, nil
	}
	admission := domain.Admission{Provisioner: a.provisioner, Units: units, Lower: lower, Defer: !lower}
	if admission.Defer && a.claimed.NoQuota {
		// The claim found no quota for the owner: nothing to check or lock.
		err = domain.ErrAdmissionDeferred
	} else {
		admitted, err = admitter.AdmitResource(a.attemptCtx, a.r.ID, a.lease, admission)
	}
	if errors.Is(err, domain.ErrAdmissionDeferred) {
		// No quota to check: the attempt's next record admits the resource, which saves a
		// statement per create.
		a.deferredAdmission = &domain.Admission{Provisioner: a.provisioner, Units: units}
		return units, units, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("admit: %w", err)
	}
	return units, admitted, nil
}

// environResource is what the environ is shown of the resource, under the attempt's lease.
func (a *attempt) environResource() *environ.Resource {
	return &environ.Resource{ID: a.r.ID, Type: a.r.Type, State: a.r.State, Config: a.r.Config, Lease: &a.lease}
}

// options are the resource's desired state and metadata, at the generation read.
func (a *attempt) options() *environ.ResourceOptions {
	return &environ.ResourceOptions{Name: a.r.Name, Owner: a.r.Owner, Args: a.r.Args, Generation: a.r.Generation, Labels: a.r.Labels}
}

// hibernatingMessage is the status message of a resource being hibernated at generation.
func hibernatingMessage(generation int64) string {
	return fmt.Sprintf("hibernating generation %d", generation)
}

// wakingMessage is the status message of a hibernated resource being woken at generation.
func wakingMessage(generation int64) string {
	return fmt.Sprintf("waking generation %d", generation)
}

// deprovision frees what the resource holds and removes its row.
func (a *attempt) deprovision() outcome {
	cfg := a.w.config
	if a.r.Provisioner == "" && len(a.r.State) == 0 {
		// No provisioner was ever pinned and no broker state saved: nothing was provisioned.
		return a.finalize("")
	}
	env, name, err := cfg.Environs.Get(a.r.Provisioner)
	if err != nil {
		return a.fail(err)
	}
	a.resolved(name)
	if err := a.brokerAdmits(name); err != nil {
		return a.fail(err)
	}
	a.log.Info("deprovisioning")
	ctx, end := a.environSpan(SpanEnvironDeprovision, env)
	err = env.Deprovision(ctx, &environ.Resource{ID: a.r.ID, Type: a.r.Type, State: a.r.State, Config: a.r.Config, Lease: &a.lease})
	end(err)
	if err = a.brokerAnswered(name, err); err != nil {
		return a.fail(fmt.Errorf("deprovision: %w", err))
	}
	return a.finalize(name)
}

func (a *attempt) finalize(freed string) outcome {
	cfg := a.w.config
	err := cfg.State.FinalizeDelete(a.attemptCtx, a.r.ID, a.lease)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return a.fail(fmt.Errorf("remove deprovisioned resource: %w", err))
	}
	a.holdsLease = false
	a.log.Info("deleted")
	return outcome{freed: freed, result: OutcomeDeleted}
}

// fail records why the attempt failed and says when to retry. Broker errors are reported
// as they are: brokers keep secrets out of their errors, and args and config values are
// never added here.
func (a *attempt) fail(err error) outcome {
	var held *domain.LeaseHeldError
	switch {
	case errors.Is(err, domain.ErrStale):
		a.log.Debug("resource changed during the attempt; reconciling again")
		return outcome{requeue: true, result: OutcomeStale}
	case errors.Is(err, domain.ErrNotFound):
		a.holdsLease = false
		return outcome{}
	case a.ctx.Err() != nil:
		// The worker is stopping: the next agent (or this one, restarted) carries on.
		return outcome{}
	case errors.As(err, &held):
		return a.leaseLost(held)
	}
	if a.attemptCtx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(a.attemptCtx))
	}
	a.failure = err

	now := a.w.now()
	d := a.w.retryPolicy().decide(a.classify(err), now)
	u := domain.ProgressUpdate{
		Generation:    a.r.Generation,
		Status:        d.status,
		Reason:        d.reason,
		StatusMessage: d.message,
		Attempts:      d.attempts,
		// The store schedules the retry this long after the write on the database's clock,
		// which every agent compares it with; the outcome's retryAt times this agent's own
		// requeue.
		RetryIn:      d.retryIn,
		LastError:    err.Error(),
		ReleaseLease: true,
	}
	o := outcome{result: d.outcome}
	if d.retryIn > 0 {
		o.retryAt = now.Add(d.retryIn)
	}
	if d.reason.Waits() {
		o.waitingFor, o.waitingReason = a.provisioner, d.reason
	}
	if d.stillWaiting {
		a.log.Debug(stillWaiting(d.reason), "waiting-since", a.r.WaitingSince, "attempts", d.attempts, "error", err, "retry-in", d.retryIn)
	} else {
		a.log.Warn("reconcile failed", "status", d.status, "reason", d.reason, "attempts", d.attempts, "error", err, "retry-in", d.retryIn)
	}

	// The attempt's own context may have timed out; the record gets a fresh bound.
	ctx, cancel := clocktimeout.WithTimeout(a.ctx, a.w.config.Clock, bookkeepingTimeout)
	defer cancel()
	if rerr := a.record(ctx, u); rerr != nil {
		if errors.Is(rerr, domain.ErrStale) {
			return outcome{requeue: true, result: OutcomeStale}
		}
		if errors.As(rerr, &held) {
			return a.leaseLost(held)
		}
		a.log.Warn("cannot record failed attempt; retrying anyway", "error", rerr)
	}
	return o
}

// leaseLost ends an attempt one of whose writes the store refused because its lease is no
// longer the row's: another agent took the resource over (or another process of this agent's
// id claimed it) while the attempt paused. Nothing more is written, not even the failure, and
// the lease is not released (it is not this attempt's); the resource is looked at again when
// the current holder's lease would end.
func (a *attempt) leaseLost(held *domain.LeaseHeldError) outcome {
	holder := held.Holder
	if holder == "" {
		holder = "a later claim, since given up"
	}
	a.log.Warn("lease lost to "+holder+"; this attempt's writes stop", "holder", held.Holder, "claim", a.lease.Token)
	a.failure = errors.New("lease lost to " + holder)
	a.holdsLease = false
	return outcome{retryAt: a.leaseRetry(held.ExpiresAt), result: OutcomeRetry}
}

// unreadableError is why a row with a column Berth cannot decode is not provisioned.
type unreadableError struct {
	reason string
}

func (e *unreadableError) Error() string {
	return e.reason + ": fix the column with SQL or delete the resource"
}

// metricsProvisioner is the provisioner the attempt is counted under: its provisioner when
// the provisioner set names it, else metrics.Unknown (also before the provisioner is known),
// so that rows naming made-up provisioners add no series.
func (a *attempt) metricsProvisioner() string {
	if a.provisioner != "" {
		if _, name, err := a.w.config.Environs.Get(a.provisioner); err == nil {
			return name
		}
	}
	return metrics.Unknown
}

// resolved notes the resource's provisioner, and tags every later log line with it.
func (a *attempt) resolved(provisioner string) {
	a.provisioner = provisioner
	a.log = a.base.With("id", a.r.ID, "provisioner", provisioner, "type", a.r.Type, "generation", a.r.Generation)
}

// record applies u, with the step the attempt passed through before it if any, to the
// resource's row and remembers the row it returns.
func (a *attempt) record(ctx context.Context, u domain.ProgressUpdate) error {
	cfg := a.w.config
	u.Passed = a.passed
	u.Admission = a.deferredAdmission
	r, err := cfg.State.RecordProgress(ctx, a.r.ID, a.lease, u)
	if err != nil {
		return fmt.Errorf("record progress: %w", err)
	}
	a.passed = nil
	a.deferredAdmission = nil
	a.r = r
	if u.ReleaseLease {
		a.holdsLease = false
	}
	return nil
}

// release gives up the lease. It runs even when the worker is being killed, bounded by its
// own timeout; should it fail, the lease simply expires. A worker being killed hands the
// resource over instead: the other agents that found it leased take it at once.
func (a *attempt) release() {
	cfg := a.w.config
	ctx, cancel := clocktimeout.WithTimeout(context.WithoutCancel(a.ctx), cfg.Clock, bookkeepingTimeout)
	defer cancel()
	release := cfg.State.ReleaseResource
	if a.ctx.Err() != nil {
		release = cfg.State.HandOverResource
	}
	if err := release(ctx, a.r.ID, a.lease); err != nil && !errors.Is(err, domain.ErrNotFound) {
		a.log.Warn("cannot release the resource's lease; it will expire", "error", err)
	}
}

// untilDue is how long the claimed row r's scheduled retry is still ahead (0 or less: due),
// on the database's clock, which scheduled it: the claim set the lease to end LeaseTTL after
// the database's now. A row that names no lease expiry (a store that keeps none) is
// compared with the agent's clock.
func (a *attempt) untilDue(r domain.Resource) time.Duration {
	if r.NextAttemptAt == nil {
		return 0
	}
	claimedAt := a.w.now()
	if r.LeaseExpiresAt != nil {
		claimedAt = r.LeaseExpiresAt.Add(-a.w.config.LeaseTTL)
	}
	return r.NextAttemptAt.Sub(claimedAt)
}

// leaseRetry is when to try a resource whose lease another agent holds until expires: then,
// or after half the base backoff when that time has passed already (the clocks of the
// agents and the database differ a little; this keeps the retries from spinning).
func (a *attempt) leaseRetry(expires time.Time) time.Time {
	now := a.w.now()
	if !expires.After(now) {
		return now.Add(a.w.config.BackoffBase / 2)
	}
	return expires
}

// waitingForCapacity reports whether the resource, as last read, waits for room on its
// provisioner, or for its owner's quota there (since its WaitingSince).
func (a *attempt) waitingForCapacity() bool {
	return a.r.Status == domain.StatusPending && (a.r.Reason == domain.ReasonWaitingForCapacity || a.r.Reason == domain.ReasonQuotaExceeded)
}

// resizeWaiting reports whether r serves at its observed generation while its resize
// waits for room on its provisioner, for its owner's quota there, or for its broker's
// breaker to close (since its WaitingSince).
func resizeWaiting(r domain.Resource) bool {
	return r.Status == domain.StatusReady && (r.Reason == domain.ReasonResizeWaitingForCapacity || r.Reason == domain.ReasonQuotaExceeded ||
		r.Reason == domain.ReasonBrokerUnavailable)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
