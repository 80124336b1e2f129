package manifolds

import (
	"context"
	"slices"
	"sync"

	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/environ"
)

// ProvisionerNamesName is the manifold that keeps the names of the environs' provisioner
// set where the membership worker reads them, to record them on the agent's row.
const ProvisionerNamesName = "provisioner-names"

// provisionerNames holds the names of the provisioner set the environs worker built last.
// The membership worker reads them through Names instead of taking the environs as an
// input: the engine restarts a worker whose input restarts, and a restarted membership
// worker resigns, giving up every lease of the agent, at each reload of the set.
type provisionerNames struct {
	mu    sync.Mutex
	names []string
}

// Names returns the names, sorted; none until the environs have started.
func (p *provisionerNames) Names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.names)
}

func (p *provisionerNames) set(names []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = slices.Sorted(slices.Values(names))
}

// manifold starts with every set the environs output and records its names; its worker
// outputs nothing and idles until the next set.
func (p *provisionerNames) manifold() dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{EnvironsName},
		Start: func(_ context.Context, getter dependency.Getter) (worker.Worker, error) {
			var set *environ.Set
			if err := getter.Get(EnvironsName, &set); err != nil {
				return nil, err
			}
			p.set(set.Names())
			return newValueWorker(nil, nil)
		},
	}
}
