package backend

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
)

// CheckSlotRequest checks what ReserveSlots needs of req before it reads anything.
func CheckSlotRequest(req domain.SlotRequest) error {
	if req.Provisioner == "" {
		return &domain.FieldError{Field: "provisioner", Msg: "must not be empty: pin the resource's provisioner before reserving slots"}
	}
	if req.Slots < 1 {
		return &domain.FieldError{Field: "args.slots", Msg: fmt.Sprintf("must be at least 1, got %d", req.Slots)}
	}
	if req.HostSlots == nil {
		return &domain.FieldError{Field: "hostSlots", Msg: "is nil: give the function that tells each host's slots"}
	}
	if req.Lease != nil && req.Checked != nil {
		return &domain.FieldError{Field: "checked", Msg: "a request under a lease is fenced by it: give a Lease or Checked, not both"}
	}
	if in := req.Instant; in != nil {
		switch {
		case req.Lease != nil || req.Checked != nil:
			return &domain.FieldError{Field: "instant", Msg: "is fenced by the row lock of its own transaction: give no Lease or Checked with it"}
		case in.Provisioner != req.Provisioner:
			return &domain.FieldError{Field: "instant.provisioner", Msg: fmt.Sprintf("is %q, not the request's %q: give the provisioner the slots are reserved on", in.Provisioner, req.Provisioner)}
		case len(in.Types) == 0:
			return &domain.FieldError{Field: "instant.types", Msg: "is empty: give the resource types the provisioner serves"}
		case in.Units < 0:
			return &domain.FieldError{Field: "instant.units", Msg: fmt.Sprintf("must not be negative, got %d", in.Units)}
		case in.Message == "":
			return &domain.FieldError{Field: "instant.message", Msg: "is empty: give the ready status message"}
		case in.Ready == nil:
			return &domain.FieldError{Field: "instant.ready", Msg: "is nil: give the function that reports the resource ready with its reservation"}
		}
	}
	return nil
}

// CheckClaim checks ClaimResource's holder and lease ttl.
func CheckClaim(id, holder string, ttl time.Duration) error {
	if holder == "" {
		return fmt.Errorf("claim resource %s: holder is empty: give the agent an identity", id)
	}
	if ttl <= 0 {
		return fmt.Errorf("claim resource %s: lease ttl is %v: use a positive duration", id, ttl)
	}
	return nil
}

// CheckStart checks ClaimAndStart's start.
func CheckStart(id string, start domain.ProvisioningStart) error {
	if start.Provisioner == "" {
		return fmt.Errorf("claim resource %s: the provisioner to start provisioning with is empty: pass the default provisioner's name", id)
	}
	for _, t := range start.Types {
		if t == "" {
			return fmt.Errorf("claim resource %s: a type to start provisioning is empty: pass the names of the types the default provisioner serves", id)
		}
	}
	return nil
}

// StartTypes returns start.Types as strings, for the stores' SQL.
func StartTypes(start domain.ProvisioningStart) []string {
	out := make([]string, len(start.Types))
	for i, t := range start.Types {
		out[i] = string(t)
	}
	return out
}

// InstantTypes returns in.Types as strings, for the stores' SQL.
func InstantTypes(in *domain.InstantProvision) []string {
	return StartTypes(domain.ProvisioningStart{Types: in.Types})
}

// InstantSteps returns the statuses and messages of in.Steps with a message, in order, for
// the stores' SQL.
func InstantSteps(in *domain.InstantProvision) (statuses, messages []string) {
	for _, step := range in.Steps {
		if step.Message != "" {
			statuses = append(statuses, string(step.Status))
			messages = append(messages, step.Message)
		}
	}
	return statuses, messages
}

// CheckCheckablePage checks ListCheckable's page size and holder.
func CheckCheckablePage(limit int, holder string) error {
	if limit < 1 {
		return &domain.FieldError{Field: "limit", Msg: fmt.Sprintf("must be at least 1, got %d", limit)}
	}
	if holder == "" {
		return &domain.FieldError{Field: "holder", Msg: "must not be empty: pass this agent's lease identity"}
	}
	return nil
}

// CheckReason checks reason is one of status's (domain.ReasonsByStatus): every status the
// agent records names why.
func CheckReason(status domain.Status, reason domain.Reason) error {
	if reason.ValidFor(status) {
		return nil
	}
	return &domain.FieldError{Field: "reason", Msg: fmt.Sprintf("%q is not a reason of status %s: use one of %v", reason, status, domain.ReasonsByStatus[status])}
}

// CheckHealthUpdate checks that h records ready, unhealthy or (for a row the check cannot
// read) error, and when unhealthy since when.
func CheckHealthUpdate(h domain.HealthUpdate) error {
	if h.Status != domain.StatusReady && h.Status != domain.StatusUnhealthy && h.Status != domain.StatusError {
		return &domain.FieldError{Field: "status", Msg: fmt.Sprintf("a health check records ready, unhealthy or error, not %q", h.Status)}
	}
	if h.Status == domain.StatusUnhealthy && h.UnhealthySince.IsZero() {
		return &domain.FieldError{Field: "unhealthy_since", Msg: "is required when the status is unhealthy"}
	}
	return CheckReason(h.Status, h.Reason)
}

// CheckRepairs checks RecordRepairs is given repairs, each saying what was put right.
func CheckRepairs(repairs []string) error {
	if len(repairs) == 0 {
		return &domain.FieldError{Field: "repairs", Msg: "is empty: give at least one repair to record"}
	}
	for i, repair := range repairs {
		if repair == "" {
			return &domain.FieldError{Field: fmt.Sprintf("repairs[%d]", i), Msg: "is empty: say what was put right"}
		}
	}
	return nil
}

// CheckCapacitySamples checks every sample has a time, a provisioner and a unit.
func CheckCapacitySamples(samples []domain.CapacitySample) error {
	for _, c := range samples {
		if c.Provisioner == "" || c.Unit == "" || c.At.IsZero() {
			return &domain.FieldError{Field: "capacity sample", Msg: "needs a time, a provisioner and a unit"}
		}
	}
	return nil
}

// CheckCapacityWarning checks w has a provisioner, a kind and a time.
func CheckCapacityWarning(w domain.CapacityWarning) error {
	if w.Provisioner == "" || w.Kind == "" || w.Since.IsZero() {
		return &domain.FieldError{Field: "capacity warning", Msg: "needs a provisioner, a kind and a time"}
	}
	return nil
}

// CheckSpec checks ApplyProvisionerSpec's provisioner and fingerprint.
func CheckSpec(provisioner, fingerprint string) error {
	switch {
	case provisioner == "":
		return &domain.FieldError{Field: "provisioner", Msg: "is required"}
	case fingerprint == "":
		return &domain.FieldError{Field: "fingerprint", Msg: "is required"}
	}
	return nil
}

// CheckAttentionPage checks ResourcesNeedingAttention's page size.
func CheckAttentionPage(limit int) error {
	if limit < 1 {
		return &domain.FieldError{Field: "limit", Msg: fmt.Sprintf("must be at least 1, got %d", limit)}
	}
	return nil
}

// CheckOrphanPage checks OrphanedReservations' page size.
func CheckOrphanPage(limit int) error {
	if limit < 1 {
		return &domain.FieldError{Field: "limit", Msg: fmt.Sprintf("must be at least 1, got %d", limit)}
	}
	return nil
}

// OrphanPageAfterError is OrphanedReservations' error for an after that is no resource id.
func OrphanPageAfterError(after string) error {
	return &domain.FieldError{Field: "after", Msg: fmt.Sprintf("%q is no resource id: pass the last id of the previous page, or \"\" for the first", after)}
}

// CheckProgress checks that u moves the row to a status of the state machine (and passes
// through one): the schema keeps no list of statuses, so that adding one needs no table
// rebuild, and the stores check them here instead.
func CheckProgress(u domain.ProgressUpdate) error {
	if !u.Status.Valid() {
		return &domain.FieldError{Field: "status", Msg: fmt.Sprintf("%q is not a status: use one of %s", u.Status, domain.StatusNames())}
	}
	if u.Passed != nil && !u.Passed.Status.Valid() {
		return &domain.FieldError{Field: "passed.status", Msg: fmt.Sprintf("%q is not a status: use one of %s", u.Passed.Status, domain.StatusNames())}
	}
	if u.Passed != nil {
		if err := CheckReason(u.Passed.Status, u.Passed.Reason); err != nil {
			return &domain.FieldError{Field: "passed.reason", Msg: err.(*domain.FieldError).Msg}
		}
	}
	return CheckReason(u.Status, u.Reason)
}
