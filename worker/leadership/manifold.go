package leadership

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/worker/database"
	"github.com/berth-dev/berth/worker/membership"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName      string
	DatabaseName   string // a database.Hold
	MembershipName string // a membership.Registration

	Logger    *slog.Logger
	Metrics   Metrics
	NewWorker func(Config) (*Worker, error)

	// Settings are handed to the worker's Config whole.
	Settings
}

// Validate reports the first missing name or function, or setting that is not valid
// (NotValid).
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("leadership manifold: empty ClockName")
	case c.DatabaseName == "":
		return errors.NotValidf("leadership manifold: empty DatabaseName")
	case c.MembershipName == "":
		return errors.NotValidf("leadership manifold: empty MembershipName")
	case c.Logger == nil:
		return errors.NotValidf("leadership manifold: nil Logger")
	case c.Metrics == nil:
		return errors.NotValidf("leadership manifold: nil Metrics")
	case c.NewWorker == nil:
		return errors.NotValidf("leadership manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("leadership manifold: %w", err)
	}
	return nil
}

// Manifold runs the leadership flag worker; its output is a Flag. It remembers the leader
// each worker last saw, so that the next one (started when leadership moved) can name the
// previous holder.
func Manifold(config ManifoldConfig) dependency.Manifold {
	var seen lastSeen
	return dependency.Manifold{
		Inputs: []string{config.ClockName, config.DatabaseName, config.MembershipName},
		Output: output,
		Start: func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
			if err := config.Validate(); err != nil {
				return nil, err
			}
			var clk clock.Clock
			if err := getter.Get(config.ClockName, &clk); err != nil {
				return nil, err
			}
			var reg membership.Registration
			if err := getter.Get(config.MembershipName, &reg); err != nil {
				return nil, err
			}
			// A hold, not the bare store: the resignation must not find the store closed
			// under it when the engine stops every worker at once.
			var hold database.Hold
			if err := getter.Get(config.DatabaseName, &hold); err != nil {
				return nil, err
			}
			w, err := config.NewWorker(Config{
				Store:        hold.State,
				Registration: reg,
				Clock:        clk,
				Logger:       config.Logger,
				Metrics:      config.Metrics,
				Previous:     seen.get(),
				Settings:     config.Settings,
			})
			if err != nil {
				hold.Release()
				return nil, err
			}
			return &database.ReleasingWorker{Worker: &flagWorker{Worker: w, seen: &seen}, Hold: hold}, nil
		},
	}
}

// Gate makes manifold start only on the leader: it takes the flag named flagName as one
// more input (unless manifold names it already, to read its term with TermOf) and, while
// the flag is false, its Start reports dependency.ErrMissing, as Juju's flag-gated
// manifolds do. The engine restarts it whenever the flag worker restarts, which it does
// when leadership moves.
func Gate(flagName string, manifold dependency.Manifold) dependency.Manifold {
	start := manifold.Start
	manifold.Inputs = append([]string(nil), manifold.Inputs...)
	if !slices.Contains(manifold.Inputs, flagName) {
		manifold.Inputs = append(manifold.Inputs, flagName)
	}
	manifold.Start = func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
		var flag Flag
		if err := getter.Get(flagName, &flag); err != nil {
			return nil, err
		}
		if !flag.Check() {
			return nil, fmt.Errorf("not the leader: %w", dependency.ErrMissing)
		}
		return start(ctx, getter)
	}
	return manifold
}

// TermOf reads the leadership term from the flag named flagName, for a gated manifold whose
// writes carry it; a flag that says this agent does not lead gives dependency.ErrMissing.
func TermOf(getter dependency.Getter, flagName string) (domain.Term, error) {
	var flag Flag
	if err := getter.Get(flagName, &flag); err != nil {
		return domain.Term{}, err
	}
	if !flag.Check() {
		return domain.Term{}, fmt.Errorf("not the leader: %w", dependency.ErrMissing)
	}
	return flag.Term(), nil
}

// lastSeen is the leader the manifold's last worker saw.
type lastSeen struct {
	mu     sync.Mutex
	leader string
}

func (s *lastSeen) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leader
}

func (s *lastSeen) set(leader string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = leader
}

// flagWorker is the flag worker that, once stopped, tells the manifold the leader it saw.
type flagWorker struct {
	*Worker
	seen *lastSeen
}

// Wait waits for the worker to stop and remembers the leader it saw.
func (w *flagWorker) Wait() error {
	err := w.Worker.Wait()
	w.seen.set(w.Worker.Leader())
	return err
}

// output gives the worker as a Flag.
func output(in worker.Worker, out any) error {
	held, ok := in.(*database.ReleasingWorker)
	if !ok {
		return fmt.Errorf("leadership manifold: expected its own worker, got %T", in)
	}
	w, ok := held.Worker.(*flagWorker)
	if !ok {
		return fmt.Errorf("leadership manifold: expected its own worker, got %T", held.Worker)
	}
	target, ok := out.(*Flag)
	if !ok {
		return fmt.Errorf("leadership manifold: expected *leadership.Flag, got %T", out)
	}
	*target = w.Worker
	return nil
}
