// Package budget is the client side of a broker's shared rate budget: a Limiter that makes
// each call an environ sends its broker wait for a token of a bucket every agent draws
// from (domain.BudgetStore), so that all agents together keep to the budget.
//
// Asking the database for every call would cost a statement a call. A Limiter instead
// draws tokens in chunks: the draw asks for as many tokens as callers wait for, up to its
// chunk size, and hands them out as they come. A caller that finds a token held takes it
// without a statement; one that finds none waits for the draw in flight, or for the time
// the bucket needs to hold the chunk again, or draws itself. There is no goroutine of its
// own: the callers draw, one at a time, each under its own context.
//
// When the bucket runs short, agents sharing it would each poll it at the full rate and
// mostly find it empty. A Limiter that comes back short waits until the bucket should hold
// what it missed, times its patience: doubled by each short draw, one less after each
// full one (so it stays patient while the bucket is contended), between 1 and 8, and never longer than half the time the bucket takes to fill (so no token is
// lost to the cap meanwhile). Measured with three agents at 20 requests/s (a chunk of 2, so
// 10 draws a second at best): about 40 draws a second without it, 17 with it (20 when a
// full draw halved the patience).
//
// Tokens held by an agent are out of the bucket, so the rate every agent together makes in
// any window of T seconds is at most burst + rate*T (the bucket's own bound) plus the
// tokens they held when the window opened, at most one chunk each. The chunk is a tenth of
// the rate (so a draw serves a tenth of a second of calls), at most a quarter of the burst,
// and at least 1: at a budget of 20 requests/s, 2 tokens a draw.
//
// The database is what agents share. A draw that fails (the database unreachable, say) is
// retried after RetryDelay, and callers wait meanwhile: the budget is never exceeded for
// want of the database, and the error is in the Limiter's report.
package budget

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
)

// RetryDelay is how long a Limiter waits after a failed draw before it draws again.
const RetryDelay = time.Second

// minShortWait is the least a Limiter waits after a draw that got less than it asked for.
const minShortWait = time.Millisecond

// maxPatience bounds how many times longer than the bucket needs a Limiter waits after a
// short draw (see Limiter.patience).
const maxPatience = 8

// Store is the bucket's store (domain.BudgetStore).
type Store interface {
	DrawBudget(ctx context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error)
}

// Observer records what a Limiter does, per provisioner (the agent's metrics).
type Observer interface {
	// ObserveBudgetWait adds d to the time callers waited for a token.
	ObserveBudgetWait(provisioner string, d time.Duration)
	// ObserveBudgetDraw counts one draw from the shared bucket.
	ObserveBudgetDraw(provisioner string)
	// ObserveBudgetTokens records the tokens the Limiter holds.
	ObserveBudgetTokens(provisioner string, held int)
}

// Config is what a Limiter needs.
type Config struct {
	// Provisioner names the bucket: one per provisioner, shared by every agent.
	Provisioner string
	// Rate is the tokens the bucket gains a second; Burst the most it holds.
	Rate  float64
	Burst int
	Store Store
	Clock clock.Clock
	// Observer records waits, draws and tokens held; nil records nothing.
	Observer Observer
	Logger   *slog.Logger
}

// Validate reports the first field that is missing or wrong.
func (c Config) Validate() error {
	switch {
	case c.Provisioner == "":
		return errors.NotValidf("budget: empty Provisioner")
	case math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.Rate <= 0:
		return errors.NotValidf("budget: Rate %v (want above 0)", c.Rate)
	case c.Burst < 1:
		return errors.NotValidf("budget: Burst %d (want at least 1)", c.Burst)
	case c.Store == nil:
		return errors.NotValidf("budget: nil Store")
	case c.Clock == nil:
		return errors.NotValidf("budget: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("budget: nil Logger")
	}
	return nil
}

// ChunkSize is the most tokens a Limiter of the budget draws at once: a tenth of the rate,
// at most a quarter of the burst, at least 1.
func ChunkSize(rate float64, burst int) int {
	return max(1, min(int(math.Ceil(rate/10)), burst/4))
}

// Limiter hands out the tokens of one provisioner's shared budget. Its methods are safe for
// concurrent use.
type Limiter struct {
	config Config
	chunk  int
	// fillTime is how long the bucket takes to fill from empty.
	fillTime time.Duration

	mu sync.Mutex
	// held are tokens drawn and not yet handed out; waiting counts the callers of Wait
	// that have none yet.
	held    int
	waiting int
	// drawn is closed when the draw in flight ends; nil while none is.
	drawn chan struct{}
	// notBefore is when the next draw may be made: when the bucket should hold a chunk
	// again after a short draw, or RetryDelay after a failed one.
	notBefore time.Time
	// patience multiplies the wait after a short draw: doubled by each short draw, one less
	// after each full one, between 1 and maxPatience.
	patience int

	// failing is true from a failed draw to the next that succeeds: the failure is logged
	// once, when it starts, and its end once.
	failing bool

	// What the report shows.
	waits     int64
	waited    time.Duration
	draws     int64
	granted   int64
	lastError string
	lastErrAt time.Time
}

// New returns a Limiter of the budget config describes. It starts holding no token.
func New(config Config) (*Limiter, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{
		config:   config,
		chunk:    ChunkSize(config.Rate, config.Burst),
		fillTime: time.Duration(float64(config.Burst) / config.Rate * float64(time.Second)),
		patience: 1,
	}, nil
}

// Wait takes a token, waiting for one as long as it must. It returns an error only when ctx
// ends first: ctx's error.
func (l *Limiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	if l.held > 0 && ctx.Err() == nil {
		l.take()
		l.mu.Unlock()
		return nil
	}
	start := l.config.Clock.Now()
	l.waiting++
	l.waits++
	err := l.wait(ctx)
	l.waiting--
	waited := l.config.Clock.Now().Sub(start)
	l.waited += waited
	l.mu.Unlock()
	if o := l.config.Observer; o != nil {
		o.ObserveBudgetWait(l.config.Provisioner, waited)
	}
	return err
}

// take hands out a held token; l.mu is held.
func (l *Limiter) take() {
	l.held--
	if o := l.config.Observer; o != nil {
		o.ObserveBudgetTokens(l.config.Provisioner, l.held)
	}
}

// wait is Wait's loop for a caller that found no token; l.mu is held on entry and on
// return, and released while it waits or draws.
func (l *Limiter) wait(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if l.held > 0 {
			l.take()
			return nil
		}
		if drawn := l.drawn; drawn != nil {
			l.mu.Unlock()
			select {
			case <-drawn:
			case <-ctx.Done():
			}
			l.mu.Lock()
			continue
		}
		if d := l.notBefore.Sub(l.config.Clock.Now()); d > 0 {
			l.mu.Unlock()
			select {
			case <-l.config.Clock.After(d):
			case <-ctx.Done():
			}
			l.mu.Lock()
			continue
		}
		l.draw(ctx)
	}
}

// draw asks the bucket for a token for each caller waiting, up to a chunk; l.mu is held on
// entry and on return, and released during the draw, which other callers wait for.
func (l *Limiter) draw(ctx context.Context) {
	want := min(max(l.waiting, 1), l.chunk)
	drawn := make(chan struct{})
	l.drawn = drawn
	l.mu.Unlock()
	grant, err := l.config.Store.DrawBudget(ctx, domain.BudgetDraw{
		Provisioner: l.config.Provisioner, Rate: l.config.Rate, Burst: l.config.Burst, Want: want,
	})
	l.mu.Lock()
	l.drawn = nil
	close(drawn)
	now := l.config.Clock.Now()
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller gave up; another waiting caller draws.
		return
	case err != nil:
		if !l.failing {
			l.config.Logger.Warn("drawing from the shared rate budget failed: calls wait, and the draw is retried every second until it succeeds", "err", err)
		}
		l.failing = true
		l.lastError, l.lastErrAt = err.Error(), now
		l.notBefore = now.Add(RetryDelay)
		return
	case l.failing:
		l.failing = false
		l.config.Logger.Info("drawing from the shared rate budget works again", "last-failure", l.lastErrAt)
	}
	l.draws++
	l.granted += int64(grant.Granted)
	l.held += grant.Granted
	switch short := float64(want-grant.Granted) - grant.Left; {
	case grant.Granted == want:
		l.patience = max(1, l.patience-1)
	case short > 0:
		// The bucket holds less than was asked for: draw again once it should hold what
		// was missing, and not sooner, however many callers arrive meanwhile (nor before
		// minShortWait, which a bucket a rounding error short would make a busy loop).
		// Other agents draw from it too: each short draw makes this one wait longer next
		// time (and each full one a little shorter), so that agents sharing a bucket draw about
		// when it holds a chunk for them rather than each polling it at the full rate. The
		// wait stays under half the time the bucket takes to fill, so that no token is lost
		// to the burst's cap while every agent waits.
		wait := time.Duration(short / l.config.Rate * float64(l.patience) * float64(time.Second))
		l.notBefore = now.Add(max(minShortWait, min(wait, l.fillTime/2)))
		l.patience = min(maxPatience, l.patience*2)
	}
	if o := l.config.Observer; o != nil {
		o.ObserveBudgetDraw(l.config.Provisioner)
		o.ObserveBudgetTokens(l.config.Provisioner, l.held)
	}
}

// Report is what /debug/engine shows of the budget.
func (l *Limiter) Report() map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := map[string]any{
		"requests-per-second": l.config.Rate,
		"burst":               l.config.Burst,
		"chunk":               l.chunk,
		"tokens-held":         l.held,
		"waiting":             l.waiting,
		"waits":               l.waits,
		"wait-seconds-total":  l.waited.Seconds(),
		"draws":               l.draws,
		"tokens-granted":      l.granted,
		"patience":            l.patience,
	}
	if l.lastError != "" {
		r["last-draw-error"] = fmt.Sprintf("%s (at %s)", l.lastError, l.lastErrAt.UTC().Format(time.RFC3339))
	}
	return r
}
