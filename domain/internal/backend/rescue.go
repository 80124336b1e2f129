package backend

import (
	"fmt"

	"github.com/berth-dev/berth/domain"
)

// ProvisionerChangeError says why SetProvisioner may not move r to provisioner, or nil when
// it may: the rule of the resources_provisioner_fixed trigger, which the stores check
// first so that the refusal names the resource, its status and the way out.
func ProvisionerChangeError(r domain.Resource, provisioner string) error {
	var why string
	switch {
	case r.Provisioner == provisioner:
		return nil
	case r.Status == domain.StatusDeleting:
		why = "it is being deleted: force the delete with `berth resource delete --force` if its provisioner is gone"
	case r.Provisioner == "":
		return nil
	case r.Status != domain.StatusPending && r.Status != domain.StatusError:
		why = fmt.Sprintf("it is %s, so %q may hold things for it: delete the resource and create it again on %q", r.Status, r.Provisioner, provisioner)
	case r.ObservedGeneration > 0 || len(r.State) > 0:
		why = fmt.Sprintf("provisioning on %q started, so it may hold things for it: delete the resource and create it again on %q", r.Provisioner, provisioner)
	default:
		return nil
	}
	return fmt.Errorf("resource %s: provisioner cannot change from %q to %q: %s: %w", r.ID, r.Provisioner, provisioner, why, domain.ErrConflict)
}

// ForgetHeldError is ForgetResource's error for a resource whose lease l a live agent holds.
func ForgetHeldError(id string, l Lease) error {
	return fmt.Errorf("forget resource %s: an agent may be provisioning or deprovisioning it right now, and forgetting it could leave behind what it makes: pause the resource (berth resource pause) or stop that agent, and try again once the lease has ended: %w", id, l.HeldError())
}
