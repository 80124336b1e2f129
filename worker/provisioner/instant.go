package provisioner

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// ResourceReader reads a resource's row (domain.State is one). With it, a resource nothing
// has been done to yet whose provisioner's environ is an environ.InstantProvisioner is
// provisioned in one transaction; a State without it provisions every resource the usual
// way.
type ResourceReader interface {
	GetResource(ctx context.Context, id string) (domain.Resource, error)
}

// ChangedRowReader is a State that keeps the rows it read with the change log (domain/postgres
// is one). An untouched row read so is provisioned without reading it again: the
// one-transaction provision checks every condition again under the row's lock.
type ChangedRowReader interface {
	// ChangedResource returns, once, resource id's row as read with its latest change.
	ChangedResource(id string) (domain.Resource, bool)
}

// changedRow returns the resource's row as read with its latest change when the State kept
// it and it is untouched (see untouched), and false otherwise: then the row is read, since
// a row kept from an earlier change may say less than the table now does (that it is
// settled, or held), and only the write of an untouched row checks it again.
func (a *attempt) changedRow(provisioner string, types []domain.ResourceType) (domain.Resource, bool) {
	reader, ok := a.w.config.State.(ChangedRowReader)
	if !ok {
		return domain.Resource{}, false
	}
	r, ok := reader.ChangedResource(a.r.ID)
	if !ok || !untouched(r, provisioner, types) {
		return domain.Resource{}, false
	}
	return r, true
}

// instant provisions the resource in one transaction when its default provisioner's environ
// can (environ.InstantProvisioner) and the row is untouched, and ends the attempt at once
// when the row it reads is settled (nothing for a claim to do but write it twice): it takes
// the row as read with its change (changedRow) or reads it, and the environ's transaction
// locks it, checks it is still so, provisions it and records it ready with the history the
// claim and the records would have written. It reports whether it did;
// when it did not, nothing was written and the attempt goes the usual way (claim, lease,
// records), which reports and retries whatever failed here.
func (a *attempt) instant() (outcome, bool) {
	cfg := a.w.config
	reader, ok := cfg.State.(ResourceReader)
	if !ok {
		return outcome{}, false
	}
	env, name, err := cfg.Environs.Get("")
	if err != nil {
		return outcome{}, false
	}
	provisioner, ok := env.(environ.InstantProvisioner)
	if !ok {
		return outcome{}, false
	}
	defer a.w.breakers.catchUp(a.attemptCtx, name)
	if !a.w.breakers.closed(a.attemptCtx, name) {
		return outcome{}, false
	}
	types := cfg.Environs.ServedTypes(env)
	r, ok := a.changedRow(name, types)
	if !ok {
		if r, err = reader.GetResource(a.attemptCtx, a.r.ID); err != nil {
			return outcome{}, false
		}
		if settled(r) {
			// A claim would find nothing to do and write the row twice (the claim and its
			// release) to say so; a change after this read logs a change of its own, which
			// brings the resource back.
			a.log.Debug("nothing to do: the resource serves its generation", "status", r.Status)
			return outcome{}, true
		}
		if !untouched(r, name, types) {
			return outcome{}, false
		}
	}
	a.r = r
	a.resolved(name)
	var units int64
	if sizer, ok := env.(environ.Sizer); ok {
		if units, err = sizer.Units(a.environResource(), a.options()); err != nil {
			a.r = domain.Resource{ID: r.ID}
			return outcome{}, false
		}
	}
	gen := r.Generation
	step := domain.ProvisioningMessage(gen)
	var readyAt time.Time
	in := domain.InstantProvision{
		Generation:  gen,
		Provisioner: name,
		Types:       types,
		Units:       units,
		Steps: []domain.StatusStep{
			{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, Message: step},
			{Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady, Message: step + ": waiting for it to serve"},
		},
		Message: domain.ReadyMessage(gen, ""),
		ReadyAt: &readyAt,
	}
	ctx, end := a.environSpan(SpanEnvironReconcile, env)
	_, err = provisioner.ProvisionInstantly(ctx, &environ.Resource{ID: r.ID, Type: r.Type, State: r.State, Config: r.Config}, a.options(), in)
	end(err)
	if err != nil {
		a.r = domain.Resource{ID: r.ID}
		if !errors.Is(err, domain.ErrNotInstant) {
			if a.ctx.Err() == nil {
				a.log.Debug("cannot provision the resource in one transaction; provisioning it the usual way", "error", err)
			}
			return outcome{}, false
		}
		// The row moved on since it was read: another agent may have provisioned it, and
		// a claim would then write it twice to find nothing to do.
		if now, err := reader.GetResource(a.attemptCtx, r.ID); err == nil && settled(now) {
			a.log.Debug("nothing to do: the resource serves its generation", "status", now.Status)
			return outcome{}, true
		}
		return outcome{}, false
	}
	a.log.Info("provisioned and ready in one transaction")
	a.w.config.Metrics.ObserveCreateToReady(a.metricsProvisioner(), r.Type, readyAt.Sub(r.CreatedAt))
	return outcome{result: OutcomeReady}, true
}

// settled reports whether r, as read, is a row a claim would leave as it is: nobody holds
// it, it is readable, not paused, has no retry scheduled, and serves its generation with
// neither a delete nor a hibernate asked for. A paused row is left to the claim, whose
// write is how a client sees the agent took a change of it up and left it paused.
func settled(r domain.Resource) bool {
	return r.LeaseHolder == "" && r.NextAttemptAt == nil && r.Readable() && !r.Paused &&
		r.UpToDate() && !r.Hibernate && r.Status != domain.StatusDeleting
}

// untouched reports whether r, as read, is a row nothing has been done to yet that
// provisioner provisions, of one of types, and that no agent holds: what a claim would
// start (domain.ProvisioningStart), and what domain.InstantProvision checks again under
// the row's lock.
func untouched(r domain.Resource, provisioner string, types []domain.ResourceType) bool {
	return r.Status == domain.StatusPending && r.Reason == domain.ReasonCreated && r.NextAttemptAt == nil &&
		!r.Paused && !r.Hibernate && r.LeaseHolder == "" && r.Readable() &&
		(r.Provisioner == "" || r.Provisioner == provisioner) && slices.Contains(types, r.Type)
}
