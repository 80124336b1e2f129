package environs

import (
	"github.com/juju/clock"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// InputNames names the manifolds the workers that act through the provisioner set
// (provisioner, health checker, capacity) start on: the agent's clock, its store and this
// worker's set. It lives with the manifold whose output it reads, so that those workers
// read it the same way.
type InputNames struct {
	Clock, Database, Environs string
}

// Inputs lists the names for a dependency.Manifold.
func (n InputNames) Inputs() []string {
	return []string{n.Clock, n.Database, n.Environs}
}

// Inputs are what such a worker starts on; Environs is this worker's output.
type Inputs struct {
	Clock    clock.Clock
	State    domain.State
	Environs *environ.Set
}

// Get reads the inputs; the getter's error for the first one missing (dependency.ErrMissing
// while a manifold is not running) is returned unchanged, so the engine retries as usual.
func (n InputNames) Get(getter dependency.Getter) (Inputs, error) {
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
