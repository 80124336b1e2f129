package environ

import (
	"context"

	"github.com/berth-dev/berth/domain"
)

// InstantProvisioner is implemented by environs whose whole provisioning of a resource is
// one database transaction (the static pool: a slot reservation). For a resource nothing
// has been done to yet, the provisioner then skips the claim, the lease and the records:
// the environ's transaction locks the row, checks it untouched as read, provisions it and
// records it ready (domain.InstantProvision), and a kill at any point rolls all of it back.
// Environs with work outside the database (Kubernetes) do not implement it: they keep the
// claim, the lease and the fence.
type InstantProvisioner interface {
	// ProvisionInstantly provisions r, read but not claimed, and records it ready with in,
	// in one transaction (see domain.InstantProvision), and returns it with its State and
	// Config. What the environ needs to know of its world (its hosts' health) comes from
	// what it learnt recently; it waits for nothing inside the transaction. An error
	// wrapping domain.ErrNotInstant says the row was not untouched as read; on any error
	// nothing was written, and the caller provisions the resource the usual way, which
	// reports and retries what fails.
	ProvisionInstantly(ctx context.Context, r *Resource, opts *ResourceOptions, in domain.InstantProvision) (*Resource, error)
}
