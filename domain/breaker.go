package domain

import (
	"context"
	"fmt"
	"time"
)

// BreakerState is where a provisioner's circuit breaker is.
//
//	          failures within Window reach Failures
//	closed ─────────────────────────────────────────► open ◄──────────┐
//	  ▲                                                │ NextProbeAt    │ the probe fails
//	  │ the probe succeeds                             ▼ passed: one    │ (OpenFor doubles,
//	  └───────────────────────────────────────── half-open ───────────┘  up to MaxOpenFor)
//	                                           (one probe, until ProbeUntil)
type BreakerState string

// The breaker's states.
const (
	// BreakerClosed lets every call through; failures are counted in a window.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen keeps every agent from calling the broker until NextProbeAt.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen lets one call through, the probe of the agent ProbeHolder, until
	// ProbeUntil: its outcome closes the breaker or opens it again.
	BreakerHalfOpen BreakerState = "half-open"
)

// BreakerSettings say when a provisioner's breaker opens and for how long.
type BreakerSettings struct {
	// Failures within Window open the breaker.
	Failures int
	Window   time.Duration
	// OpenFor is how long the breaker stays open the first time; each time it opens again
	// without closing in between it stays twice as long, up to MaxOpenFor.
	OpenFor    time.Duration
	MaxOpenFor time.Duration
}

// DefaultBreakerSettings are a provisioner's breaker settings when its entry in the
// provisioner set gives none: five failures in 30 seconds open it for 10 seconds, doubling
// up to five minutes.
func DefaultBreakerSettings() BreakerSettings {
	return BreakerSettings{Failures: 5, Window: 30 * time.Second, OpenFor: 10 * time.Second, MaxOpenFor: 5 * time.Minute}
}

// openFor is how long the breaker stays open the opens-th time in a row (from 1).
func (s BreakerSettings) openFor(opens int) time.Duration {
	d := s.OpenFor
	for i := 1; i < opens && d < s.MaxOpenFor; i++ {
		d *= 2
	}
	return min(d, s.MaxOpenFor)
}

// Breaker is a provisioner's circuit breaker, shared by every agent through the store. Its
// times are the database's.
type Breaker struct {
	Provisioner string
	State       BreakerState
	// Failures counts the broker's failures since WindowStartedAt (the window's, while
	// closed; since it opened too, while open or half-open).
	Failures        int
	WindowStartedAt time.Time
	OpenedAt        time.Time // when it last opened
	NextProbeAt     time.Time // open: when one agent may probe the broker
	ProbeHolder     string    // half-open: the agent whose call is the probe
	ProbeUntil      time.Time // half-open: when the probe's hold ends, should its agent go
	// LastError is a short text of the last failure (e.g. "503 Service Unavailable from the
	// API server"); never a URL or a credential.
	LastError string
	// OpenCount is how many times it opened since it last closed.
	OpenCount int
	UpdatedAt time.Time
	// Now is the database's time when the row was read or written, to compare the other
	// times with.
	Now time.Time
}

// BrokerFailure is one failure of a broker's, as a breaker counts it.
type BrokerFailure struct {
	Settings BreakerSettings
	// RetryAfter is the wait the broker asked for; the breaker opens for at least as long.
	RetryAfter time.Duration
	// Error is a short text of the failure, for LastError.
	Error string
}

// Failed is the breaker after failure f at now: a closed breaker counts it in its window
// (one that has passed starts anew) and opens when the count reaches f.Settings.Failures;
// an open one counts it and waits at least f.RetryAfter; a half-open one (the probe
// failed) opens again, for twice as long as the last time.
func (b Breaker) Failed(now time.Time, f BrokerFailure) Breaker {
	b.LastError = f.Error
	switch b.State {
	case BreakerOpen:
		b.Failures++
		b.NextProbeAt = later(b.NextProbeAt, now.Add(f.RetryAfter))
		return b
	case BreakerHalfOpen:
		b.Failures++
		return b.open(now, f)
	}
	if b.WindowStartedAt.IsZero() || now.Sub(b.WindowStartedAt) >= f.Settings.Window {
		b.State, b.Failures, b.WindowStartedAt = BreakerClosed, 0, now
	}
	b.Failures++
	if b.Failures >= f.Settings.Failures {
		return b.open(now, f)
	}
	return b
}

func (b Breaker) open(now time.Time, f BrokerFailure) Breaker {
	b.State = BreakerOpen
	b.OpenCount++
	b.OpenedAt = now
	b.NextProbeAt = now.Add(max(f.Settings.openFor(b.OpenCount), f.RetryAfter))
	b.ProbeHolder, b.ProbeUntil = "", time.Time{}
	return b
}

// Succeeded is the breaker after a call of the broker succeeded: a half-open one
// closes, its counts cleared. Closed and open ones are as they were: a closed one's
// failures leave its window as it moves on, and a call that succeeds while the breaker is
// open began before it opened, which says less than the probe will.
func (b Breaker) Succeeded() Breaker {
	if b.State != BreakerHalfOpen {
		return b
	}
	b.State, b.Failures, b.WindowStartedAt, b.OpenCount = BreakerClosed, 0, time.Time{}, 0
	b.NextProbeAt, b.ProbeHolder, b.ProbeUntil = time.Time{}, "", time.Time{}
	return b
}

// Probe gives holder the probe at now, for lease: an open breaker whose NextProbeAt has
// come, or a half-open one whose probe's hold has ended (its agent went), turns half-open
// with holder's probe. ok is true when holder holds the probe after it.
func (b Breaker) Probe(now time.Time, holder string, lease time.Duration) (_ Breaker, ok bool) {
	switch {
	case b.State == BreakerHalfOpen && b.ProbeHolder == holder && now.Before(b.ProbeUntil):
		return b, true
	case b.State == BreakerOpen && !now.Before(b.NextProbeAt),
		b.State == BreakerHalfOpen && !now.Before(b.ProbeUntil):
		b.State, b.ProbeHolder, b.ProbeUntil = BreakerHalfOpen, holder, now.Add(lease)
		return b, true
	}
	return b, false
}

// CheckBrokerFailure refuses a failure whose settings cannot open a breaker.
func CheckBrokerFailure(f BrokerFailure) error {
	switch {
	case f.Settings.Failures < 1:
		return &FieldError{Field: "breaker.failures", Msg: fmt.Sprintf("is %d: must be at least 1", f.Settings.Failures)}
	case f.Settings.Window <= 0:
		return &FieldError{Field: "breaker.window", Msg: fmt.Sprintf("is %s: must be positive", f.Settings.Window)}
	case f.Settings.OpenFor <= 0:
		return &FieldError{Field: "breaker.open_for", Msg: fmt.Sprintf("is %s: must be positive", f.Settings.OpenFor)}
	case f.Settings.MaxOpenFor < f.Settings.OpenFor:
		return &FieldError{Field: "breaker.max_open_for", Msg: fmt.Sprintf("is %s: must be at least open_for (%s)", f.Settings.MaxOpenFor, f.Settings.OpenFor)}
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// BreakerStore keeps the provisioners' circuit breakers (table broker_breakers), which every
// agent sharing the store reads and writes, on the database's clock. A provisioner with no
// row has a closed breaker.
type BreakerStore interface {
	// RecordBrokerFailure counts failure f of provisioner's broker (Breaker.Failed) and
	// returns the breaker.
	RecordBrokerFailure(ctx context.Context, provisioner string, f BrokerFailure) (Breaker, error)
	// RecordBrokerSuccess records that a call of provisioner's broker succeeded
	// (Breaker.Succeeded) and returns the breaker.
	RecordBrokerSuccess(ctx context.Context, provisioner string) (Breaker, error)
	// TakeBrokerProbe gives agent holder the probe of provisioner's breaker for lease
	// (Breaker.Probe): of all agents asking at once, one gets it. It returns the breaker
	// and whether holder holds the probe.
	TakeBrokerProbe(ctx context.Context, provisioner, holder string, lease time.Duration) (Breaker, bool, error)
	// ListBreakers returns every provisioner's breaker that has a row, by provisioner,
	// each with Now set.
	ListBreakers(ctx context.Context) ([]Breaker, error)
}
