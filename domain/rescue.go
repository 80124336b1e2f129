package domain

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Forgetting says who forgets a resource (ResourceStore.ForgetResource) and why, for the
// history event that records it.
type Forgetting struct {
	// By names who asked (the CLI gives the operating-system user); PostgreSQL adds the
	// database role that removed the row, which the client cannot make up.
	By string
	// Reason is the operator's own words, may be empty.
	Reason string
}

// ForgetMessage is the message of the control event that records the forgetting f of r: who
// forgot it and what its provisioner may have left behind, by the keys of its state and
// config only (their values may hold secrets). role is the database role that removed the
// row, "" where the store has none.
func ForgetMessage(r Resource, f Forgetting, role string) string {
	var b strings.Builder
	b.WriteString("forgotten without deprovisioning")
	if who := strings.TrimSpace(f.By); who != "" || role != "" {
		b.WriteString(" by ")
		b.WriteString(who)
		if role != "" {
			if who != "" {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "(database role %s)", role)
		}
	}
	if reason := strings.TrimSpace(f.Reason); reason != "" {
		fmt.Fprintf(&b, ": %q", reason)
	}
	provisioner := r.Provisioner
	if provisioner == "" {
		provisioner = "the default provisioner"
	} else {
		provisioner = fmt.Sprintf("provisioner %q", provisioner)
	}
	fmt.Fprintf(&b, "; it was %s (reason %s) at generation %d, observed %d; %s may have left behind what it made for it",
		r.Status, orUnset(string(r.Reason)), r.Generation, r.ObservedGeneration, provisioner)
	fmt.Fprintf(&b, " (state keys: %s; config keys: %s)", sortedKeys(r.State), sortedKeys(r.Config))
	return b.String()
}

// CheckProvisionerName refuses a provisioner name that is empty or not text, naming the
// flag's field and the fix.
func CheckProvisionerName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", &FieldError{"provisioner", "is empty: name a provisioner of the agents' set (see `berth agents`)"}
	}
	return name, checkText("provisioner", name, MaxNameLength)
}

func sortedKeys(m map[string]any) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

// Forget removes the resource's row without deprovisioning it (ResourceStore.ForgetResource)
// and returns it as it was: the way out for a resource whose provisioner is gone.
func (s *Service) Forget(ctx context.Context, id string, f Forgetting) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	if err := checkText("reason", f.Reason, MaxReasonLength); err != nil {
		return Resource{}, err
	}
	return s.store.ForgetResource(ctx, id, f)
}

// MaxReasonLength bounds the reason given for forgetting a resource, in characters.
const MaxReasonLength = 512

// SetProvisioner moves the resource to another provisioner (ResourceStore.SetProvisioner).
func (s *Service) SetProvisioner(ctx context.Context, id, provisioner string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	provisioner, err = CheckProvisionerName(provisioner)
	if err != nil {
		return Resource{}, err
	}
	return s.store.SetProvisioner(ctx, id, provisioner)
}
