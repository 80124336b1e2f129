package provisioner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/juju/clock"
	jujuerrors "github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/clocktimeout"
)

// Circuit breakers: a provisioner whose broker fails repeatedly (429, 5xx, timeouts,
// refused connections: errors the environ marks environ.Unavailable) is not called by any
// agent until one agent's probe finds it answering again. The breakers live in the store
// (domain.Breaker), shared by every agent; each worker reads them at most once every
// breakerRefresh and asks the store only to count a failure, take the probe, or record
// the probe's success.
//
// Before an attempt calls its broker the worker asks the breaker (admit). While it is
// open, or half-open with another attempt's probe, the resource waits: its status stays
// (pending, provisioning, deleting or hibernating) with the reason BrokerUnavailable and
// the message "broker unavailable: what failed, n failures in the window; next probe at
// T", and it is retried at T without counting an attempt or growing its backoff. A wait
// that goes on keeps its message, so the whole wait is one event in the resource's
// history. Once the breaker's next probe is due, the first attempt to ask takes the probe
// (one across all agents); its broker's answer closes the breaker and wakes this agent's
// resources that wait for it, as a freed slot wakes those that wait for capacity, or opens
// it again for twice as long. A broker failure of an attempt counts towards the breaker
// (answered); when it opens the breaker the resource waits as above, otherwise it is
// retried with backoff as any transient failure.

// BreakerStore is the store's side of the breakers (domain.BreakerStore is one).
type BreakerStore interface {
	RecordBrokerFailure(ctx context.Context, provisioner string, f domain.BrokerFailure) (domain.Breaker, error)
	RecordBrokerSuccess(ctx context.Context, provisioner string) (domain.Breaker, error)
	TakeBrokerProbe(ctx context.Context, provisioner, holder string, lease time.Duration) (domain.Breaker, bool, error)
	ListBreakers(ctx context.Context) ([]domain.Breaker, error)
}

// BreakerMetrics records the breakers (*metrics.Metrics is one).
type BreakerMetrics interface {
	// ObserveBreakerState records provisioner's breaker state.
	ObserveBreakerState(provisioner string, state domain.BreakerState)
	// ObserveBreakerOpened counts a breaker this agent opened.
	ObserveBreakerOpened(provisioner string)
	// ObserveBrokerFailure counts a broker failure of class (environ.UnavailableClass).
	ObserveBrokerFailure(provisioner, class string)
}

// BreakerConfig is what the worker's breakers need; its zero value turns them off.
type BreakerConfig struct {
	Store BreakerStore
	// Settings gives a provisioner's breaker settings and whether its breaker is on
	// ((*environ.Set).Breaker is one).
	Settings func(provisioner string) (domain.BreakerSettings, bool)
	Metrics  BreakerMetrics
}

// Validate reports a BreakerConfig with a store but not the rest (NotValid).
func (c BreakerConfig) Validate() error {
	switch {
	case c.Store == nil && c.Settings == nil && c.Metrics == nil:
		return nil
	case c.Store == nil:
		return jujuerrors.NotValidf("provisioner: Breakers without a Store")
	case c.Settings == nil:
		return jujuerrors.NotValidf("provisioner: Breakers without Settings")
	case c.Metrics == nil:
		return jujuerrors.NotValidf("provisioner: Breakers without Metrics")
	}
	return nil
}

// breakerRefresh is how old the worker's copy of the breakers may get.
const breakerRefresh = time.Second

// breakerStale is how old the copy may be for closed to take it as it is, and refresh it
// only after the attempt's write.
const breakerStale = 2 * breakerRefresh

// breakerProbeLease is how long a probe holds the breaker half-open: should its agent go
// before its broker answers, another agent takes the probe then.
const breakerProbeLease = 30 * time.Second

// breakers is the worker's view of the store's breakers. Its methods are safe for the
// attempts' goroutines.
type breakers struct {
	config BreakerConfig
	clock  clock.Clock
	holder string // the agent's id, on the probes it takes
	logger *slog.Logger

	mu         sync.Mutex
	views      map[string]breakerView
	readAt     time.Time // on the worker's clock; zero: never read
	refreshing bool      // a read of the store is under way
	firstRead  chan struct{}
	probes     map[string]probe
}

// breakerView is a breaker as last read or written, and when on the worker's clock.
type breakerView struct {
	domain.Breaker
	at time.Time
}

// now is the database's time now, as the view's reading of it and the worker's clock
// since say.
func (v breakerView) now(clk clock.Clock) time.Time {
	return v.Now.Add(clk.Now().Sub(v.at))
}

// probe is this agent's probe of a breaker: the attempt of resource id calls the broker,
// until the probe's hold ends (on the worker's clock).
type probe struct {
	id    string
	until time.Time
}

func newBreakers(config BreakerConfig, clk clock.Clock, holder string, logger *slog.Logger) *breakers {
	return &breakers{config: config, clock: clk, holder: holder, logger: logger,
		views: make(map[string]breakerView), probes: make(map[string]probe), firstRead: make(chan struct{})}
}

// brokerWait is an attempt that does not call its broker because the provisioner's breaker
// is open: the resource waits until the next probe. It wraps the broker's failure that
// opened (or kept open) the breaker, if the attempt made one.
type brokerWait struct {
	message string
	retryIn time.Duration
	err     error
}

func (e *brokerWait) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.message
}

func (e *brokerWait) Unwrap() error { return e.err }

// closed reports whether provisioner's breaker is off or closed, as admit reads it, without
// taking a probe: an attempt that finds it otherwise leaves the call to admit. It reads the
// store only when the worker's copy is breakerStale old: a younger copy is taken as it is,
// and the attempt refreshes it after its write (catchUp), so that the read is not in the
// way of the resource's provision.
func (b *breakers) closed(ctx context.Context, provisioner string) bool {
	if _, on := b.settings(provisioner); !on {
		return true
	}
	b.refresh(ctx, breakerStale)
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.views[provisioner]
	return !ok || v.State == domain.BreakerClosed
}

// catchUp refreshes the worker's copy of the breakers when provisioner has one and the copy
// is breakerRefresh old, as closed left it.
func (b *breakers) catchUp(ctx context.Context, provisioner string) {
	if _, on := b.settings(provisioner); on {
		b.refresh(ctx, breakerRefresh)
	}
}

// admit says whether the attempt of resource id may call provisioner's broker: nil when
// it may (the breaker is closed, or this attempt holds its probe), or the wait. The store
// is asked outside the lock, so attempts on other provisioners never wait for it.
func (b *breakers) admit(ctx context.Context, provisioner, id string) *brokerWait {
	settings, on := b.settings(provisioner)
	if !on {
		return nil
	}
	b.refresh(ctx, breakerRefresh)
	b.mu.Lock()
	v, ok := b.views[provisioner]
	if !ok || v.State == domain.BreakerClosed {
		b.mu.Unlock()
		return nil
	}
	if p, ok := b.probes[provisioner]; ok && b.clock.Now().Before(p.until) {
		b.mu.Unlock()
		if p.id == id {
			return nil
		}
		return b.wait(v, settings)
	}
	delete(b.probes, provisioner)
	b.mu.Unlock()
	if !due(v, b.clock) {
		return b.wait(v, settings)
	}
	// Attempts that find the probe due together all ask: the store gives it to one.
	taken, ok, err := b.config.Store.TakeBrokerProbe(ctx, provisioner, b.holder, breakerProbeLease)
	if err != nil {
		// The attempt's own writes will tell whether the store is there.
		b.logger.Warn("cannot take the broker's probe; trying the broker", "provisioner", provisioner, "error", err)
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v = b.keep(taken)
	switch {
	case ok:
		b.probes[provisioner] = probe{id: id, until: b.clock.Now().Add(taken.ProbeUntil.Sub(taken.Now))}
		b.logger.Info("probing the broker", "provisioner", provisioner, "id", id, "failures", taken.Failures, "last-error", taken.LastError)
		return nil
	case v.State == domain.BreakerClosed:
		// Another agent's probe closed it since this agent last read it.
		return nil
	}
	return b.wait(v, settings)
}

// answered counts the answer err of provisioner's broker to the attempt of resource id: a
// failure the environ marks unavailable counts towards the breaker, and is returned as a
// *brokerWait when the breaker is open after it; any other answer, nil included, is a
// success, which closes a half-open breaker. closed says this answer closed it. A call cut
// short by the attempt's own end (its timeout, the worker stopping) got no answer: it
// counts for nothing, and a probe it was is left to end with its hold.
func (b *breakers) answered(ctx context.Context, provisioner, id string, err error) (_ error, closed bool) {
	settings, on := b.settings(provisioner)
	if !on {
		return err, false
	}
	b.mu.Lock()
	probing := b.probes[provisioner].id == id
	if probing {
		delete(b.probes, provisioner)
	}
	before := b.views[provisioner].State
	b.mu.Unlock()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err, false
	}
	u, unavailable := environ.IsUnavailable(err)
	if !unavailable {
		if !probing && before != domain.BreakerHalfOpen {
			return err, false
		}
		after, serr := b.config.Store.RecordBrokerSuccess(ctx, provisioner)
		if serr != nil {
			b.logger.Warn("cannot record the broker's answer to its probe", "provisioner", provisioner, "error", serr)
			return err, false
		}
		b.mu.Lock()
		b.keep(after)
		b.mu.Unlock()
		closed = after.State == domain.BreakerClosed && before != domain.BreakerClosed
		if closed {
			b.logger.Info("the broker answers again: breaker closed", "provisioner", provisioner)
		}
		return err, closed
	}
	b.config.Metrics.ObserveBrokerFailure(provisioner, string(u.Class))
	after, serr := b.config.Store.RecordBrokerFailure(ctx, provisioner,
		domain.BrokerFailure{Settings: settings, RetryAfter: u.RetryAfter, Error: u.Summary})
	if serr != nil {
		b.logger.Warn("cannot count the broker's failure", "provisioner", provisioner, "error", serr)
		return err, false
	}
	b.mu.Lock()
	v := b.keep(after)
	b.mu.Unlock()
	if after.State == domain.BreakerClosed {
		return err, false
	}
	if after.OpenedAt.Equal(after.Now) {
		b.config.Metrics.ObserveBreakerOpened(provisioner)
		b.logger.Warn("the broker fails: breaker opened", "provisioner", provisioner, "failures", after.Failures,
			"last-error", after.LastError, "next-probe-at", after.NextProbeAt)
	}
	w := b.wait(v, settings)
	w.err = err
	return w, false
}

// report is the breakers as the worker last saw them, for its engine report.
func (b *breakers) report() map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]any, len(b.views))
	for name, v := range b.views {
		r := map[string]any{"state": string(v.State), "failures": v.Failures}
		if v.LastError != "" {
			r["last-error"] = v.LastError
		}
		if v.State == domain.BreakerOpen {
			r["next-probe-at"] = v.NextProbeAt.UTC().Format(time.RFC3339)
		}
		if p, ok := b.probes[name]; ok {
			r["probing"] = p.id
		}
		out[name] = r
	}
	return out
}

// settings are provisioner's breaker settings, and whether the worker has breakers and
// this one is on.
func (b *breakers) settings(provisioner string) (domain.BreakerSettings, bool) {
	if b == nil || b.config.Store == nil || provisioner == "" {
		return domain.BreakerSettings{}, false
	}
	return b.config.Settings(provisioner)
}

// refresh reads every breaker when the last read is maxAge old, outside the lock:
// meanwhile the other attempts use the views as they are, except before the first read,
// which they wait for. A store that cannot be read leaves the views as they were until the
// next refresh.
func (b *breakers) refresh(ctx context.Context, maxAge time.Duration) {
	b.mu.Lock()
	now := b.clock.Now()
	if b.refreshing || (!b.readAt.IsZero() && now.Sub(b.readAt) < maxAge) {
		first := b.firstRead
		b.mu.Unlock()
		select {
		case <-first:
		case <-ctx.Done():
		}
		return
	}
	b.readAt, b.refreshing = now, true
	b.mu.Unlock()

	list, err := b.config.Store.ListBreakers(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refreshing = false
	if err != nil {
		b.logger.Warn("cannot read the brokers' breakers", "error", err)
	} else {
		seen := make(map[string]bool, len(list))
		for _, br := range list {
			b.keep(br)
			seen[br.Provisioner] = true
		}
		for name, v := range maps.Clone(b.views) {
			// A breaker first kept since the read began is newer than the list.
			if !seen[name] && v.at.Before(now) {
				delete(b.views, name)
			}
		}
	}
	select {
	case <-b.firstRead:
	default:
		close(b.firstRead)
	}
}

// keep remembers br as read now, unless the view holds a later reading of it, and returns
// the view: reads and writes of the store overlap, and their answers may come back out of
// order.
func (b *breakers) keep(br domain.Breaker) breakerView {
	if v, ok := b.views[br.Provisioner]; ok && br.Now.Before(v.Now) {
		return v
	}
	v := breakerView{Breaker: br, at: b.clock.Now()}
	b.views[br.Provisioner] = v
	b.config.Metrics.ObserveBreakerState(br.Provisioner, br.State)
	return v
}

// wait is the wait of a resource whose broker's breaker v is open or half-open with
// another attempt's probe: until the next probe, or until the probe's hold ends (at most
// OpenFor: its success wakes the resource sooner on this agent).
func (b *breakers) wait(v breakerView, settings domain.BreakerSettings) *brokerWait {
	now := v.now(b.clock)
	until := v.NextProbeAt
	if v.State == domain.BreakerHalfOpen {
		until = v.ProbeUntil
		if until.Sub(now) > settings.OpenFor {
			until = now.Add(settings.OpenFor)
		}
	}
	retryIn := max(until.Sub(now), breakerRefresh)
	return &brokerWait{
		retryIn: retryIn,
		message: fmt.Sprintf("broker unavailable: %s, %d failures in %s; next probe at %s",
			v.LastError, v.Failures, settings.Window, b.clock.Now().Add(retryIn).UTC().Format(time.RFC3339)),
	}
}

// due says the breaker's probe may be taken now: it is open and its next probe has come,
// or half-open with a probe whose hold has ended.
func due(v breakerView, clk clock.Clock) bool {
	now := v.now(clk)
	switch v.State {
	case domain.BreakerOpen:
		return !now.Before(v.NextProbeAt)
	case domain.BreakerHalfOpen:
		return !now.Before(v.ProbeUntil)
	}
	return false
}

// brokerUnavailable is the retry decision of a resource whose breaker is open (failure
// f): its status stays where BrokerUnavailable is one of its reasons (a ready resource
// whose resize waits keeps serving its old generation; hibernating for a hibernate,
// provisioning otherwise), no attempt is counted, it is retried at the next probe, and a
// wait that goes on keeps its message, so that the wait is one event in the resource's
// history.
func brokerUnavailable(f failure) retryDecision {
	d := retryDecision{attempts: f.attempts, reason: domain.ReasonBrokerUnavailable, outcome: OutcomeBrokerUnavailable,
		status: f.status, message: f.wait.message, retryIn: f.wait.retryIn}
	serves := d.status == domain.StatusReady && f.serving && !f.hibernating
	if !d.reason.ValidFor(d.status) || (d.status == domain.StatusReady && !serves) {
		d.status = domain.StatusProvisioning
		if f.hibernating {
			d.status = domain.StatusHibernating
		}
	}
	if serves {
		d.message = fmt.Sprintf("%s; serving generation %d meanwhile", d.message, f.observed)
	}
	if f.reason == domain.ReasonBrokerUnavailable && f.status == d.status {
		d.message, d.stillWaiting = f.message, true
	}
	return d
}

// brokerAdmits is nil when the attempt may call provisioner's broker, or the *brokerWait
// of its breaker, for fail.
func (a *attempt) brokerAdmits(provisioner string) error {
	if w := a.w.breakers.admit(a.attemptCtx, provisioner, a.r.ID); w != nil {
		return w
	}
	return nil
}

// brokerAnswered counts the answer err of provisioner's broker to the attempt (see
// breakers.answered) and returns err, or the wait its failure leaves the resource in.
func (a *attempt) brokerAnswered(provisioner string, err error) error {
	ctx, cancel := clocktimeout.WithTimeout(a.ctx, a.w.config.Clock, bookkeepingTimeout)
	defer cancel()
	err, closed := a.w.breakers.answered(ctx, provisioner, a.r.ID, err)
	if closed {
		a.closedBreaker = provisioner
	}
	return err
}

// stillWaiting is the log message of a wait that goes on for reason.
func stillWaiting(reason domain.Reason) string {
	if reason == domain.ReasonBrokerUnavailable {
		return "still waiting for the broker"
	}
	return "still waiting for capacity"
}
