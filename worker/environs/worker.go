// Package environs builds the agent's provisioner set (the named environs) and holds it for
// the workers that provision through it. When the worker stops, every environ is closed;
// when it restarts with a new set, the engine bounces only the workers that depend on it.
package environs

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/worker/v4/catacomb"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// SetBuilder builds a provisioner set (*environ.Registry is one).
type SetBuilder interface {
	NewSet(setJSON []byte, defaultName string, deps environ.Deps) (*environ.Set, error)
}

// Config holds what the worker needs.
type Config struct {
	SetJSON []byte
	Default string
	Builder SetBuilder
	Slots   domain.SlotStore
	// Resources looks up resource rows for the environs' orphan sweeps.
	Resources environ.ResourceGetter
	Clock     clock.Clock
	Logger    *slog.Logger
}

// Validate reports the first missing field.
func (c Config) Validate() error {
	switch {
	case len(c.SetJSON) == 0:
		return errors.New("environs: SetJSON is required (--provisioners FILE or BERTH_PROVISIONER_SET_JSON)")
	case c.Builder == nil:
		return errors.New("environs: Builder is required")
	case c.Slots == nil:
		return errors.New("environs: Slots is required")
	case c.Clock == nil:
		return errors.New("environs: Clock is required")
	case c.Logger == nil:
		return errors.New("environs: Logger is required")
	}
	return nil
}

// Worker holds a built provisioner set.
type Worker struct {
	catacomb catacomb.Catacomb
	set      *environ.Set
}

// NewWorker builds the set described by config.
func NewWorker(config Config) (*Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	set, err := config.Builder.NewSet(config.SetJSON, config.Default, environ.Deps{
		Slots:     config.Slots,
		Resources: config.Resources,
		Logger:    config.Logger,
		Clock:     config.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("build provisioner set: %w", err)
	}
	w := &Worker{set: set}
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

// Report lists the provisioners in the engine report.
func (w *Worker) Report() map[string]any {
	provisioners := make(map[string]any, len(w.set.Environs))
	for name, env := range w.set.Environs {
		provisioners[name] = env.Type()
	}
	return map[string]any{"default": w.set.Default, "provisioners": provisioners}
}

func (w *Worker) loop() error {
	<-w.catacomb.Dying()
	if err := w.set.Close(); err != nil {
		return err
	}
	return w.catacomb.ErrDying()
}
