package healthcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/clocktimeout"
	"github.com/berth-dev/berth/metrics"
)

// recordTimeout bounds the write of one check's outcome.
const recordTimeout = 10 * time.Second

// checkDone is what a resource check tells the loop.
type checkDone struct {
	round   int    // the seq of the round that started the check
	skipped bool   // the resource was being reconciled; the next round checks it
	failed  bool   // CheckResource failed
	result  string // Result*, for Metrics
}

// check health-checks one resource (through prep, the checks prepared for its page, if any),
// records what changed and counts the result; a check cut short by the worker stopping, or
// skipped, is not counted.
func (w *Worker) check(ctx context.Context, r domain.Resource, prep *prepared) checkDone {
	done := w.checkResource(ctx, r, prep)
	if ctx.Err() == nil && !done.skipped {
		w.config.Metrics.ObserveHealthCheck(w.provisionerLabel(r.Provisioner), done.result)
	}
	return done
}

// provisionerLabel is the provisioner a resource's check is counted under: its name in the
// provisioner set, or metrics.Unknown for a name the set does not have, so that rows naming
// made-up provisioners add no series.
func (w *Worker) provisionerLabel(name string) string {
	if _, canonical, err := w.config.Environs.Get(name); err == nil {
		return canonical
	}
	return metrics.Unknown
}

// checkResource health-checks one resource and records what changed.
func (w *Worker) checkResource(ctx context.Context, r domain.Resource, prep *prepared) checkDone {
	log := w.config.Logger.With("id", r.ID, "provisioner", r.Provisioner, "generation", r.Generation)
	if !r.Readable() {
		return w.recordUnreadable(ctx, log, r)
	}
	env, _, err := w.config.Environs.Get(r.Provisioner)
	if err != nil {
		log.Debug("cannot health-check resource: its provisioner is not in the provisioner set", "error", err)
		return checkDone{result: ResultError}
	}
	var checker environ.PreparedChecks = env
	if prep.current(env) {
		checker = prep.checks
	}
	// Held until the outcome is recorded, so that no reconcile starts between the check and
	// its record.
	unlock, ok := w.config.Locks.TryLock(r.ID)
	if !ok {
		log.Debug("resource is being reconciled; skipping its check this round")
		return checkDone{skipped: true}
	}
	defer unlock()
	// What the check's writes carry: the store applies them only while the row is still as
	// it was read here, whatever happened to it since (a hibernate, a wake, a delete).
	checked := r.CheckedBy(w.config.Agent.ID)
	checkCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, w.config.CheckTimeout)
	res, checkErr := checker.CheckResource(checkCtx,
		&environ.Resource{ID: r.ID, Type: r.Type, State: r.State, Config: r.Config, Checked: &checked},
		&environ.ResourceOptions{Name: r.Name, Owner: r.Owner, Args: r.Args, Generation: r.Generation, Labels: r.Labels})
	if checkErr != nil && checkCtx.Err() != nil {
		checkErr = fmt.Errorf("%w (%v)", checkErr, context.Cause(checkCtx))
	}
	cancel()
	if ctx.Err() != nil {
		return checkDone{}
	}
	if errors.Is(checkErr, domain.ErrStale) || errors.Is(checkErr, domain.ErrNotFound) {
		// The store refused a repair (or the environ found before one) that the row moved
		// on (another generation, deleting, paused, hibernating, claimed since, gone): what
		// the check found is not the resource's any more, and nothing is recorded.
		log.Debug("resource changed while it was checked; nothing recorded", "error", checkErr)
		return checkDone{skipped: true}
	}

	if unavailable, ok := environ.IsUnavailable(checkErr); ok {
		// The broker itself failed (throttled, a server error, unreachable): that says
		// nothing of the resource, so its status stays as it is until a check can tell.
		log.Debug("broker unavailable; the resource's health is unknown this round", "error", unavailable)
		return checkDone{result: ResultError}
	}
	u := w.outcome(r, res, checkErr)
	found := checkDone{failed: checkErr != nil, result: ResultHealthy}
	switch {
	case checkErr != nil:
		found.result = ResultUnhealthy
	case len(u.Repairs) > 0:
		found.result = ResultRepaired
	}
	// Repairs of earlier checks whose record failed go first, with this record, so that
	// the history keeps the order they were made in.
	u.Repairs = append(w.unrecorded.takeFor(r.ID), u.Repairs...)
	if u.Status == r.Status && u.Reason == r.Reason && u.StatusMessage == r.StatusMessage && u.State == nil && u.Config == nil && len(u.Repairs) == 0 {
		return found
	}
	recordCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, recordTimeout)
	defer cancel()
	_, err = w.config.Store.RecordHealth(recordCtx, r.ID, checked, u)
	switch {
	case errors.Is(err, domain.ErrStale) && len(u.Repairs) > 0:
		// The row moved on after the environ repaired it: the status found is dropped, but
		// the repairs were made all the same, and the history says so.
		log.Debug("resource changed while it was checked; recording only its repairs", "error", err)
		if err := w.config.Store.RecordRepairs(recordCtx, r.ID, u.Repairs); err != nil {
			if errors.Is(err, domain.ErrNotFound) || ctx.Err() != nil {
				return found
			}
			log.Warn("cannot record the repairs of a health check; the next round tries again", "repairs", u.Repairs, "error", err)
			w.recordFailed(err)
			w.keepUnrecorded(log, r.ID, u.Repairs)
			return checkDone{failed: found.failed, result: ResultError}
		}
		logRepairs(log, u.Repairs)
		return found
	case errors.Is(err, domain.ErrStale) || errors.Is(err, domain.ErrNotFound):
		log.Debug("resource changed while it was checked; dropping the result", "error", err)
		return found
	case err != nil:
		w.recordFailed(err)
		if ctx.Err() == nil {
			log.Warn("cannot record the health check; the next round checks again", "repairs", u.Repairs, "error", err)
			w.keepUnrecorded(log, r.ID, u.Repairs)
		}
		return checkDone{failed: found.failed, result: ResultError}
	}
	logRepairs(log, u.Repairs)
	switch {
	case u.Status == domain.StatusUnhealthy && r.Status != domain.StatusUnhealthy:
		log.Warn("resource is unhealthy", "error", checkErr)
	case u.Status == domain.StatusReady && r.Status == domain.StatusUnhealthy:
		log.Info("resource is healthy again")
	}
	return found
}

// logRepairs logs each repair a check made, as recorded.
func logRepairs(log *slog.Logger, repairs []string) {
	for _, repair := range repairs {
		log.Info("repaired resource", "repair", repair)
	}
}

// recordUnreadable records a row whose columns Berth cannot decode (written by another
// program) as error, saying which column and why, instead of checking it with what could not
// be read. The record hands the row to the provisioner, which looks at it again until it is
// fixed; until then it is no longer checkable.
func (w *Worker) recordUnreadable(ctx context.Context, log *slog.Logger, r domain.Resource) checkDone {
	unlock, ok := w.config.Locks.TryLock(r.ID)
	if !ok {
		return checkDone{skipped: true}
	}
	defer unlock()
	recordCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, recordTimeout)
	defer cancel()
	message := r.UnreadableReason() + ": fix the column with SQL or delete the resource"
	_, err := w.config.Store.RecordHealth(recordCtx, r.ID, r.CheckedBy(w.config.Agent.ID), domain.HealthUpdate{
		Status: domain.StatusError, Reason: domain.ReasonUnreadableRow, StatusMessage: message,
	})
	switch {
	case errors.Is(err, domain.ErrStale) || errors.Is(err, domain.ErrNotFound):
		log.Debug("unreadable resource changed meanwhile; leaving it to the next round", "error", err)
	case err != nil:
		w.recordFailed(err)
		if ctx.Err() == nil {
			log.Warn("cannot record an unreadable resource as error; the next round tries again", "error", err)
		}
		return checkDone{result: ResultError}
	default:
		log.Warn("resource row is unreadable; recorded as error", "reason", r.UnreadableReason())
	}
	return checkDone{result: ResultError}
}

// outcome is what a check of r that gave res and checkErr records.
func (w *Worker) outcome(r domain.Resource, res *environ.Resource, checkErr error) domain.HealthUpdate {
	now := w.now()
	var u domain.HealthUpdate
	if checkErr != nil {
		since := now
		if r.Status == domain.StatusUnhealthy && r.UnhealthySince != nil {
			since = *r.UnhealthySince
		}
		u.Status, u.Reason = domain.StatusUnhealthy, domain.ReasonHealthCheckFailed
		u.UnhealthySince = since
		u.StatusMessage = fmt.Sprintf("health check failing since %s: %v", since.UTC().Format(time.RFC3339), checkErr)
	} else {
		u.Status = domain.StatusReady
		switch {
		case r.Status == domain.StatusUnhealthy:
			u.Reason = domain.ReasonRecovered
			u.StatusMessage = fmt.Sprintf("ready at generation %d: health check passing again since %s", r.Generation, now.UTC().Format(time.RFC3339))
			if r.UnhealthySince != nil {
				u.StatusMessage += fmt.Sprintf(" (failed since %s)", r.UnhealthySince.UTC().Format(time.RFC3339))
			}
		case r.Reason.ValidFor(domain.StatusReady):
			// Ready as it was, Recovered included until the next reconcile: nothing to write.
			u.Reason, u.StatusMessage = r.Reason, r.StatusMessage
		default:
			u.Reason, u.StatusMessage = domain.ReasonAvailable, r.StatusMessage
		}
	}
	if res != nil {
		if res.State != nil && !sameJSON(res.State, r.State) {
			u.State = res.State
		}
		if res.Config != nil && !sameJSON(res.Config, r.Config) {
			u.Config = res.Config
		}
		u.Repairs = res.Repairs
	}
	return u
}

// sameJSON reports whether a and b are stored as the same JSON: a broker's ints equal the
// float64s read back from the database.
func sameJSON(a, b map[string]any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	var na, nb any
	if json.Unmarshal(ja, &na) != nil || json.Unmarshal(jb, &nb) != nil {
		return false
	}
	return reflect.DeepEqual(na, nb)
}
