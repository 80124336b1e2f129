package static

import (
	"context"
	"fmt"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// ProvisionInstantly implements environ.InstantProvisioner: the reservation of a runtime
// nothing has been done to yet, and its ready record, are one transaction. It probes
// nothing: a host is a candidate only when its latest probe (by the pool's Check, or by an
// AwaitReady or a placement of the usual way) succeeded within the probe cache's life, the
// result AwaitReady would have been answered with. When no host is, or none of those has
// room, nothing is written and the caller goes the usual way, whose placement probes.
func (e *staticEnviron) ProvisionInstantly(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions, in domain.InstantProvision) (*environ.Resource, error) {
	opts, args, err := e.runtimeArgs(r, opts)
	if err != nil {
		return nil, err
	}
	hosts := e.hosts()
	down := e.health.notRecentlyUp(hosts)
	if len(down) == len(hosts) {
		return nil, fmt.Errorf("no host of provisioner %q answered a probe within %s: %w", e.name, probeCacheTTL, domain.ErrNotInstant)
	}
	placement := e.place.withDown(down)
	placement.unserved = true
	var out *environ.Resource
	in.Ready = func(res domain.Reservation) (domain.ReadyRecord, error) {
		var err error
		if out, err = e.resource(r, res); err != nil {
			return domain.ReadyRecord{}, err
		}
		return domain.ReadyRecord{State: out.State, Config: out.Config}, nil
	}
	req := domain.SlotRequest{Provisioner: e.name, ResourceID: r.ID, Owner: opts.Owner, Slots: args.Slots, Instant: &in}
	pick := e.checkedPick(&req, placement.pick)
	if _, err := e.slots.ReserveSlots(ctx, req, pick); err != nil {
		return nil, fmt.Errorf("place runtime: %w", err)
	}
	return out, nil
}
