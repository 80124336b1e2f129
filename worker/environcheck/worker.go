// Package environcheck runs the worker that checks each environ (its hosts or cluster, and
// what its Check sweeps, such as orphans) once per interval and records the outcome in
// berth_environ_check_failures_total and the engine report. The checks concern the whole
// environ, not one agent's work, so only the leader runs them (see worker/leadership).
//
// Every environ is due at start and then once per Interval, on its own schedule: a Check that
// hangs (up to CheckTimeout) delays no other environ, and is not started again while it is in
// flight.
package environcheck

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

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/clocktimeout"
	"github.com/berth-dev/berth/internal/inflight"
)

// Environs names the environs and resolves a provisioner name to its broker (*environ.Set is
// one).
type Environs interface {
	Names() []string
	Get(name string) (environ.Environ, string, error)
}

// Metrics counts the checks (*metrics.Metrics is one).
type Metrics interface {
	// ObserveEnvironCheck counts one check of an environ; err is its failure, or nil.
	ObserveEnvironCheck(provisioner string, err error)
}

// Config holds what the worker needs: its dependencies, and its Settings.
type Config struct {
	Environs Environs
	Clock    clock.Clock
	Logger   *slog.Logger
	Metrics  Metrics

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Environs == nil:
		return errors.NotValidf("environ checker: nil Environs")
	case c.Clock == nil:
		return errors.NotValidf("environ checker: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("environ checker: nil Logger")
	case c.Metrics == nil:
		return errors.NotValidf("environ checker: nil Metrics")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("environ checker: %w", err)
	}
	return nil
}

// Worker checks the environs; see the package doc.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config

	mu       sync.Mutex // guards environs, which Report reads
	environs map[string]result
}

// result is the last outcome of one environ's Check.
type result struct {
	at  time.Time
	err error
}

// NewWorker starts an environ checker.
func NewWorker(config Config) (worker.Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{config: config, environs: make(map[string]result)}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Kill asks the worker to stop.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Report shows each environ's last Check.
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	environs := make(map[string]any, len(w.environs))
	for name, r := range w.environs {
		e := map[string]any{"checked-at": r.at, "healthy": r.err == nil}
		if r.err != nil {
			e["error"] = r.err.Error()
		}
		environs[name] = e
	}
	return map[string]any{"interval": w.config.Interval.String(), "environs": environs}
}

// done is the outcome of one environ's Check.
type done struct {
	name string
	err  error
}

// loop runs the checks, then cancels and waits for every one it started.
func (w *Worker) loop() error {
	return inflight.Run(&w.catacomb, w.run)
}

func (w *Worker) run(running *sync.WaitGroup) error {
	ctx := w.catacomb.Context(context.Background())
	names := w.config.Environs.Names()
	// Sends never block: at most one Check per environ is in flight.
	results := make(chan done, len(names))
	sched := newSchedule(names, w.config.Clock.Now(), w.config.Interval)
	var alarm clock.Alarm
	defer func() {
		if alarm != nil {
			alarm.Stop()
		}
	}()
	for {
		for _, name := range sched.takeDue(w.config.Clock.Now()) {
			running.Add(1)
			go func() {
				defer running.Done()
				results <- done{name: name, err: w.check(ctx, name)}
			}()
		}
		if alarm != nil {
			alarm.Stop()
			alarm = nil
		}
		var alarmC <-chan time.Time
		if next := sched.next(); !next.IsZero() {
			alarm = w.config.Clock.NewAlarm(next)
			alarmC = alarm.Chan()
		}
		select {
		case <-w.catacomb.Dying():
			return w.catacomb.ErrDying()
		case <-alarmC:
		case d := <-results:
			delete(sched.checking, d.name)
			w.checked(ctx, d)
		}
	}
}

// check runs one environ's Check.
func (w *Worker) check(ctx context.Context, name string) error {
	env, _, err := w.config.Environs.Get(name)
	if err != nil {
		return err
	}
	ctx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, w.config.CheckTimeout)
	defer cancel()
	if err := env.Check(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		}
		return err
	}
	return nil
}

// checked counts and logs a Check's outcome; one cut short by the worker stopping is not.
func (w *Worker) checked(ctx context.Context, d done) {
	if ctx.Err() != nil {
		return
	}
	w.config.Metrics.ObserveEnvironCheck(d.name, d.err)
	w.mu.Lock()
	previous, seen := w.environs[d.name]
	w.environs[d.name] = result{at: w.config.Clock.Now(), err: d.err}
	w.mu.Unlock()
	switch {
	case d.err != nil:
		w.config.Logger.Warn("provisioner health check failed", "provisioner", d.name, "error", d.err)
	case seen && previous.err != nil:
		w.config.Logger.Info("provisioner health check passes again", "provisioner", d.name)
	default:
		w.config.Logger.Debug("provisioner health check passed", "provisioner", d.name)
	}
}

// schedule is when each environ's next Check is due and which are checking now.
type schedule struct {
	interval time.Duration
	due      map[string]time.Time
	checking map[string]bool
}

func newSchedule(names []string, start time.Time, interval time.Duration) *schedule {
	s := &schedule{interval: interval, due: make(map[string]time.Time, len(names)), checking: make(map[string]bool, len(names))}
	for _, name := range names {
		s.due[name] = start
	}
	return s
}

// takeDue marks every environ due at now and not checking as checking, moves its next Check
// one interval on (past now, if it is late) and returns their names, sorted.
func (s *schedule) takeDue(now time.Time) []string {
	var names []string
	for name, due := range s.due {
		if s.checking[name] || due.After(now) {
			continue
		}
		s.checking[name] = true
		s.due[name] = due.Add((now.Sub(due)/s.interval + 1) * s.interval)
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// next is the earliest due time of an environ not checking now; zero when there is none.
func (s *schedule) next() time.Time {
	var next time.Time
	for name, due := range s.due {
		if !s.checking[name] && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return next
}
