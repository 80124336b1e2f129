package static

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// reservationsGetter is the slot store's optional batched lookup; without it a page of checks
// is checked one runtime at a time.
type reservationsGetter interface {
	GetReservations(ctx context.Context, provisioner string, resourceIDs []string) ([]domain.Reservation, error)
}

// preparedFor is how long the reservations read for a page of checks answer for them. They
// are as old as the page's rows the checker compares them with, and it writes only what
// differs from those, at their generation; a check later than this reads its own, so that a
// sparse round does not work from reads many seconds old.
const preparedFor = probeCacheTTL

// PrepareChecks implements environ.CheckPreparer: it reads the page's reservations in one
// query. A runtime found without one is not repaired on that read: its check reads its
// reservation again first, as CheckResource does.
func (e *staticEnviron) PrepareChecks(ctx context.Context, ids []string) (environ.PreparedChecks, error) {
	getter, ok := e.slots.(reservationsGetter)
	if !ok {
		return e, nil
	}
	found, err := getter.GetReservations(ctx, e.name, ids)
	if err != nil {
		return nil, fmt.Errorf("read the slot reservations of %d runtimes: %w", len(ids), err)
	}
	p := &preparedChecks{env: e, readAt: e.clock.Now(), reservations: make(map[string]domain.Reservation, len(found))}
	for _, res := range found {
		p.reservations[res.ResourceID] = res
	}
	return p, nil
}

// preparedChecks checks runtimes on reservations read for their page; it is only read once
// made, so any number of checks may use it at once.
type preparedChecks struct {
	env          *staticEnviron
	readAt       time.Time
	reservations map[string]domain.Reservation // by resource id
}

// CheckResource implements environ.PreparedChecks: a runtime whose reservation was read less
// than preparedFor ago is checked on it; any other (none read, or read too long ago) is checked
// as staticEnviron.CheckResource would, reading its reservation itself.
func (p *preparedChecks) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	res, ok := p.reservations[r.ID]
	if !ok || p.env.clock.Now().Sub(p.readAt) >= preparedFor {
		return p.env.CheckResource(ctx, r, opts)
	}
	if err := p.env.supported(r); err != nil {
		return nil, err
	}
	return p.env.checkReserved(ctx, r, res)
}
