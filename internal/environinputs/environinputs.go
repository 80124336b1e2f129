// Package environinputs reads the engine inputs shared by the workers that act through the
// provisioner set (provisioner, health checker, capacity): the agent's clock, its store and
// the set itself.
package environinputs

import (
	"github.com/juju/clock"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Names names the manifolds the inputs come from.
type Names struct {
	Clock, Database, Environs string
}

// Inputs lists the names for a dependency.Manifold.
func (n Names) Inputs() []string {
	return []string{n.Clock, n.Database, n.Environs}
}

// Inputs are what such a worker starts on.
type Inputs struct {
	Clock    clock.Clock
	State    domain.State
	Environs *environ.Set
}

// Get reads the inputs; the getter's error for the first one missing (dependency.ErrMissing
// while a manifold is not running) is returned unchanged, so the engine retries as usual.
func (n Names) Get(getter dependency.Getter) (Inputs, error) {
	var in Inputs
	if err := getter.Get(n.Clock, &in.Clock); err != nil {
		return Inputs{}, err
	}
	if err := getter.Get(n.Database, &in.State); err != nil {
		return Inputs{}, err
	}
	if err := getter.Get(n.Environs, &in.Environs); err != nil {
		return Inputs{}, err
	}
	return in, nil
}
