package healthcheck

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/clocktimeout"
)

// maxKeptRepairs is how many unrecorded repairs are kept for one resource; older ones are
// dropped (and logged) past it. A check repairs what it finds drifted, so a resource gains
// one only when its drift came back after a repair, while the store refused every record:
// more than this means an outage long enough that the log has said so many times over.
const maxKeptRepairs = 16

// unrecordedRepairs keeps, by resource id, the repairs checks made whose record failed (the
// store unreachable or timing out), until the start of a later round or the resource's next
// check records them: a repair removes the drift it found, so no later check would find it
// again and the history would never say it was made. They are kept in memory only: an
// agent that stops or dies with some kept loses them, as it has logged them at warn when
// their record failed.
type unrecordedRepairs struct {
	mu   sync.Mutex
	byID map[string][]string
}

// keep adds repairs to those kept for the resource id and returns how many older ones it
// dropped to stay within maxKeptRepairs.
func (u *unrecordedRepairs) keep(id string, repairs []string) (dropped int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byID == nil {
		u.byID = make(map[string][]string)
	}
	kept := append(u.byID[id], repairs...)
	if over := len(kept) - maxKeptRepairs; over > 0 {
		dropped = over
		kept = slices.Clone(kept[over:])
	}
	u.byID[id] = kept
	return dropped
}

// restore puts back repairs taken for the resource id, ahead of any kept since.
func (u *unrecordedRepairs) restore(id string, repairs []string) {
	u.mu.Lock()
	newer := u.byID[id]
	delete(u.byID, id)
	u.mu.Unlock()
	u.keep(id, append(slices.Clone(repairs), newer...))
}

// takeFor returns the repairs kept for the resource id, oldest first, and forgets them.
func (u *unrecordedRepairs) takeFor(id string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	kept := u.byID[id]
	delete(u.byID, id)
	return kept
}

// ids returns the resources with repairs kept, sorted.
func (u *unrecordedRepairs) ids() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Sorted(maps.Keys(u.byID))
}

// count is how many resources have repairs kept.
func (u *unrecordedRepairs) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.byID)
}

// keepUnrecorded keeps the repairs of a check whose record failed, for the next round to
// record. Its caller reports the failure first (recordFailed), so that a report counting
// them always says why they are kept.
func (w *Worker) keepUnrecorded(log *slog.Logger, id string, repairs []string) {
	if len(repairs) == 0 {
		return
	}
	if dropped := w.unrecorded.keep(id, repairs); dropped > 0 {
		log.Warn("too many unrecorded repairs kept for this resource; dropping the oldest",
			"dropped", dropped, "kept", maxKeptRepairs)
	}
}

// recordFailed puts err, a failed record of a check's result or repairs, in the report as
// its last-record-error. It is called where the record fails, before any repairs are kept
// for it.
func (w *Worker) recordFailed(err error) {
	w.mu.Lock()
	w.lastRecordError = err.Error()
	w.mu.Unlock()
}

// recordKept records the repairs kept from checks whose record failed, each resource's as
// repair events in the status its row has now. Those of a resource that is gone are
// dropped. At the first the store refuses for another reason, it puts that resource's back
// and leaves the rest for the next round: the store is most likely unreachable, and a
// timeout for each would hold the round back.
func (w *Worker) recordKept(ctx context.Context) {
	ids := w.unrecorded.ids()
	for i, id := range ids {
		// A check of the resource may have taken them since, to record with its own.
		repairs := w.unrecorded.takeFor(id)
		if len(repairs) == 0 {
			continue
		}
		log := w.config.Logger.With("id", id)
		recordCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, recordTimeout)
		err := w.config.Store.RecordRepairs(recordCtx, id, repairs)
		cancel()
		switch {
		case err == nil:
			logRepairs(log, repairs)
		case errors.Is(err, domain.ErrNotFound):
			log.Debug("resource is gone; dropping the repairs its checks could not record", "repairs", repairs)
		case ctx.Err() != nil:
			return
		default:
			w.config.Logger.Warn("cannot record the repairs kept from earlier checks; the next round tries again",
				"resources", len(ids)-i, "error", err)
			w.recordFailed(err)
			w.unrecorded.restore(id, repairs)
			return
		}
	}
}
