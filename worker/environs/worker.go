package environs

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4/catacomb"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// SetBuilder builds a provisioner set (*environ.Registry is one).
type SetBuilder interface {
	NewSet(setJSON []byte, defaultName string, deps environ.Deps) (*environ.Set, error)
}

// SetSource supplies the provisioner set to build (the provisioner-set worker is one).
type SetSource interface {
	// Current returns the set's JSON and a channel closed once another set replaces it.
	Current() ([]byte, <-chan struct{})
}

// Config holds what the worker needs.
type Config struct {
	Source  SetSource
	Default string
	Builder SetBuilder
	Slots   domain.SlotStore
	// Specs records each provisioner's spec fingerprint.
	Specs domain.ProvisionerSpecStore
	// Resources looks up resource rows for the environs' orphan sweeps.
	Resources environ.ResourceGetter
	// Budgets holds the provisioners' shared rate budgets; BudgetObserver (optional)
	// records their waits, draws and tokens.
	Budgets        domain.BudgetStore
	BudgetObserver environ.BudgetObserver
	Clock          clock.Clock
	Logger         *slog.Logger
}

// Validate reports the first missing field.
func (c Config) Validate() error {
	switch {
	case c.Source == nil:
		return errors.NotValidf("environs: nil Source")
	case c.Builder == nil:
		return errors.NotValidf("environs: nil Builder")
	case c.Slots == nil:
		return errors.NotValidf("environs: nil Slots")
	case c.Specs == nil:
		return errors.NotValidf("environs: nil Specs")
	case c.Budgets == nil:
		return errors.NotValidf("environs: nil Budgets")
	case c.Clock == nil:
		return errors.NotValidf("environs: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("environs: nil Logger")
	}
	return nil
}

// Worker holds a built provisioner set.
type Worker struct {
	catacomb     catacomb.Catacomb
	config       Config
	set          *environ.Set
	fingerprints map[string]string
	replaced     <-chan struct{}
}

// NewWorker builds the source's current set.
func NewWorker(config Config) (*Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	setJSON, replaced := config.Source.Current()
	set, err := config.Builder.NewSet(setJSON, config.Default, environ.Deps{
		Slots:          config.Slots,
		Resources:      config.Resources,
		Budgets:        config.Budgets,
		BudgetObserver: config.BudgetObserver,
		Logger:         config.Logger,
		Clock:          config.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("build provisioner set: %w", err)
	}
	fingerprints := make(map[string]string, len(set.Environs))
	for _, name := range set.Names() {
		fp, err := set.Fingerprint(name)
		if err != nil {
			set.Close()
			return nil, fmt.Errorf("fingerprint provisioner %q: %w", name, err)
		}
		fingerprints[name] = fp
	}
	w := &Worker{config: config, set: set, fingerprints: fingerprints, replaced: replaced}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		set.Close()
		return nil, err
	}
	config.Logger.Info("provisioner set ready", "provisioners", set.Names(), "default", set.Default)
	return w, nil
}

// Kill asks the worker to stop.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// budgetReporter is an environ with a shared rate budget to show (nil: none).
type budgetReporter interface {
	BudgetReport() map[string]any
}

// brokerReporter is an environ whose broker runs apart (an external one), with its state
// to show.
type brokerReporter interface {
	BrokerReport() map[string]any
}

// Report lists the provisioners, their types and spec fingerprints in the engine report,
// the shared rate budget of those that have one, and the broker of external ones.
func (w *Worker) Report() map[string]any {
	provisioners := make(map[string]any, len(w.set.Environs))
	for name, env := range w.set.Environs {
		p := map[string]any{"type": env.Type(), "fingerprint": w.fingerprints[name]}
		if b, ok := env.(budgetReporter); ok {
			if report := b.BudgetReport(); report != nil {
				p["budget"] = report
			}
		}
		if b, ok := env.(brokerReporter); ok {
			p["broker"] = b.BrokerReport()
		}
		provisioners[name] = p
	}
	return map[string]any{"default": w.set.Default, "provisioners": provisioners}
}

func (w *Worker) loop() error {
	err := w.run()
	closeErr := w.set.Close()
	switch {
	case closeErr == nil:
	case errors.Is(err, w.catacomb.ErrDying()):
		return closeErr
	default:
		w.config.Logger.Warn("closing the replaced provisioner set", "err", closeErr)
	}
	return err
}

func (w *Worker) run() error {
	ctx := w.catacomb.Context(context.Background())
	if err := w.applySpecs(ctx); err != nil {
		if ctx.Err() != nil {
			return w.catacomb.ErrDying()
		}
		return err
	}
	select {
	case <-w.catacomb.Dying():
		return w.catacomb.ErrDying()
	case <-w.replaced:
		w.config.Logger.Info("provisioner set replaced: restarting the environs and the workers that use them")
		return dependency.ErrBounce
	}
}

// applySpecs records every provisioner's fingerprint; the store moves the resources of a
// provisioner whose spec changed, or that is back after being absent, to a new generation.
// Then it records every other provisioner as absent, so that putting one back retries the
// resources that failed while it was missing.
func (w *Worker) applySpecs(ctx context.Context) error {
	for _, name := range w.set.Names() {
		bumped, err := w.config.Specs.ApplyProvisionerSpec(ctx, name, w.fingerprints[name])
		if err != nil {
			return fmt.Errorf("record the spec of provisioner %q: %w", name, err)
		}
		if bumped > 0 {
			w.config.Logger.Info("provisioner spec changed: resources scheduled for reconcile",
				"provisioner", name, "resources", bumped, "fingerprint", w.fingerprints[name])
			continue
		}
		w.config.Logger.Debug("provisioner spec recorded", "provisioner", name, "fingerprint", w.fingerprints[name])
	}
	absent, err := w.config.Specs.MarkProvisionersAbsent(ctx, w.set.Names())
	if err != nil {
		return fmt.Errorf("record the provisioners that are not in the set: %w", err)
	}
	if len(absent) > 0 {
		w.config.Logger.Warn("provisioners removed from the set: their resources are kept, not deprovisioned, "+
			"and are reconciled once the provisioner is back", "provisioners", absent)
	}
	return nil
}
