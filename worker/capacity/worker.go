package capacity

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
	"github.com/berth-dev/berth/internal/clocktimeout"
)

// Store is the part of domain.State the worker uses.
// The writes carry the leadership term the worker runs under and apply only while it holds.
type Store interface {
	RecordCapacity(ctx context.Context, term domain.Term, samples []domain.CapacitySample) error
	ListCapacityWarnings(ctx context.Context) ([]domain.CapacityWarning, error)
	SetCapacityWarning(ctx context.Context, term domain.Term, w domain.CapacityWarning) (bool, error)
}

// Environs names the environs and resolves a name to its broker (*environ.Set is one).
type Environs interface {
	Names() []string
	Get(name string) (environ.Environ, string, error)
}

// Observer sees every capacity sample and, with every sample, the current state of each of
// the provisioner's warnings (e.g. to export them as metrics). ForgetCapacity is called when
// the worker stops: the agent that runs it next samples afresh, and what this one showed
// would only go stale.
type Observer interface {
	ObserveCapacity(provisioner string, c environ.Capacity)
	ObserveCapacityWarning(provisioner, kind string, active bool)
	ForgetCapacity()
}

// Config holds what the worker needs: its dependencies, and its Settings.
type Config struct {
	Store    Store
	Environs Environs
	Clock    clock.Clock
	Logger   *slog.Logger
	Observer Observer // optional: nil observes nothing
	// Term is the leadership term the worker runs under: a sample or warning recorded once
	// another agent leads is refused by the store.
	Term domain.Term

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.NotValidf("capacity worker: nil Store")
	case c.Environs == nil:
		return errors.NotValidf("capacity worker: nil Environs")
	case c.Clock == nil:
		return errors.NotValidf("capacity worker: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("capacity worker: nil Logger")
	case c.Term.Holder == "" || c.Term.Session <= 0:
		return errors.NotValidf("capacity worker: Term %+v (pass the leadership flag's term)", c.Term)
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("capacity worker: %w", err)
	}
	return nil
}

// Worker samples capacity every Interval; see the package doc.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config

	// Only the loop touches these.
	loaded   bool                // the stored warning states have been read
	warnings map[warningKey]bool // the known state of each warning: active or not

	mu     sync.Mutex // guards report
	report map[string]any
}

type warningKey struct{ provisioner, kind string }

// NewWorker starts a capacity worker.
func NewWorker(config Config) (worker.Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{config: config, warnings: make(map[warningKey]bool), report: map[string]any{}}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Kill asks the worker to stop.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Report shows each provisioner's last sample, its error and its active warnings.
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]any, len(w.report))
	for k, v := range w.report {
		out[k] = v
	}
	return out
}

// loop samples at start and then every Interval after the first sample; a sample that
// overruns its interval is followed by the next at once.
func (w *Worker) loop() error {
	defer w.config.Observer.ForgetCapacity()
	ctx := w.catacomb.Context(context.Background())
	next := w.config.Clock.Now()
	for {
		w.sample(ctx)
		next = next.Add(w.config.Interval)
		if now := w.config.Clock.Now(); next.Before(now) {
			next = now
		}
		alarm := w.config.Clock.NewAlarm(next)
		select {
		case <-w.catacomb.Dying():
			alarm.Stop()
			return w.catacomb.ErrDying()
		case <-alarm.Chan():
		}
	}
}

// sample takes one sample of every provisioner that reports capacity. Warnings of a
// provisioner that no longer does are cleared first.
func (w *Worker) sample(ctx context.Context) {
	if !w.loaded {
		w.load(ctx)
	}
	at := w.config.Clock.Now().UTC().Truncate(time.Microsecond)
	var names []string
	reporters := make(map[string]environ.CapacityReporter)
	for _, name := range w.config.Environs.Names() {
		env, _, err := w.config.Environs.Get(name)
		if err != nil {
			continue
		}
		if reporter, ok := env.(environ.CapacityReporter); ok {
			names = append(names, name)
			reporters[name] = reporter
		}
	}
	for key, active := range w.warnings {
		if _, reporting := reporters[key.provisioner]; active && !reporting {
			w.transition(ctx, at, key, warning{message: "the provisioner no longer reports capacity (removed from the provisioner set?)"})
		}
	}
	w.mu.Lock()
	for name := range w.report {
		if _, reporting := reporters[name]; !reporting {
			delete(w.report, name)
		}
	}
	w.mu.Unlock()
	for _, name := range names {
		w.sampleOne(ctx, at, name, reporters[name])
		if ctx.Err() != nil {
			return
		}
	}
}

// publish sets the provisioner's entry of the report.
func (w *Worker) publish(name string, report map[string]any) {
	w.mu.Lock()
	w.report[name] = report
	w.mu.Unlock()
}

// sampleOne records one provisioner's capacity, updates its warnings and publishes its report
// before the observer sees the warnings.
func (w *Worker) sampleOne(ctx context.Context, at time.Time, name string, reporter environ.CapacityReporter) {
	ctx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, w.config.Timeout)
	defer cancel()
	log := w.config.Logger.With("provisioner", name)
	c, err := reporter.Capacity(ctx)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		}
		log.Warn("cannot read the provisioner's capacity; trying again next interval", "error", err)
		w.publish(name, map[string]any{"error": err.Error()})
		return
	}
	report := map[string]any{
		"sampled-at": at,
		"unit":       c.Unit,
		"total":      c.Total,
		"used":       c.Used,
		"free":       max(c.Total-c.Used, 0),
	}
	samples := []domain.CapacitySample{{At: at, Provisioner: name, Unit: c.Unit, Total: c.Total, Used: c.Used}}
	for _, h := range c.Hosts {
		samples = append(samples, domain.CapacitySample{At: at, Provisioner: name, Host: h.Host, Unit: c.Unit, Total: h.Total, Used: h.Used, Down: h.Down})
	}
	if err := w.config.Store.RecordCapacity(ctx, w.config.Term, samples); err != nil {
		w.logWriteError(log, "cannot record the provisioner's capacity", err)
		report["error"] = err.Error()
	}
	if w.config.Observer != nil {
		w.config.Observer.ObserveCapacity(name, c)
	}
	if !w.loaded {
		// Until the stored states are known a crossing cannot be told from a repeat.
		w.publish(name, report)
		return
	}
	states := evaluate(c, w.config.Thresholds)
	var active []string
	for _, kind := range Kinds {
		key := warningKey{name, kind}
		if state := states[kind]; w.warnings[key] != state.active {
			w.transition(ctx, at, key, state)
		}
		if w.warnings[key] {
			active = append(active, kind)
		}
	}
	report["warnings"] = active
	w.publish(name, report)
	if w.config.Observer != nil {
		for _, kind := range Kinds {
			w.config.Observer.ObserveCapacityWarning(name, kind, w.warnings[warningKey{name, kind}])
		}
	}
}

// transition records that key's warning starts or clears. The store says whether this agent
// saw the crossing first (several agents may sample one provisioner); only then is it logged.
func (w *Worker) transition(ctx context.Context, at time.Time, key warningKey, state warning) {
	changed, err := w.config.Store.SetCapacityWarning(ctx, w.config.Term, domain.CapacityWarning{
		Provisioner: key.provisioner, Kind: key.kind, Active: state.active, Message: state.message, Since: at,
	})
	if err != nil {
		if ctx.Err() == nil {
			w.logWriteError(w.config.Logger.With("provisioner", key.provisioner, "warning", key.kind),
				"cannot record a capacity warning; trying again next interval", err)
		}
		return
	}
	w.warnings[key] = state.active
	if !changed {
		return
	}
	if state.active {
		w.config.Logger.Warn("capacity warning", "provisioner", key.provisioner, "warning", key.kind, "message", state.message)
	} else {
		w.config.Logger.Info("capacity warning cleared", "provisioner", key.provisioner, "warning", key.kind)
	}
}

// logWriteError logs a refused write: at debug when the term ended (another agent leads
// now, and this worker stops once the leadership flag says so), else as a warning.
func (w *Worker) logWriteError(log *slog.Logger, msg string, err error) {
	if errors.Is(err, domain.ErrNotLeader) {
		log.Debug("not the leader any more; nothing recorded", "error", err)
		return
	}
	log.Warn(msg, "error", err)
}

// load reads the stored warning states, so that a restarted worker does not raise again what
// is already raised.
func (w *Worker) load(ctx context.Context) {
	stored, err := w.config.Store.ListCapacityWarnings(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot read the capacity warnings; trying again next interval", "error", err)
		}
		return
	}
	for _, s := range stored {
		w.warnings[warningKey{s.Provisioner, s.Kind}] = s.Active
	}
	w.loaded = true
}
