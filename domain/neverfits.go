package domain

import "fmt"

// NeverFitsError is a request for more slots than its provisioner can ever hold: more than
// its largest host, or its whole quota, has in all. Unlike ErrNoCapacity no room that frees
// can help, so the provisioner fails the resource with ReasonNeverFits instead of waiting;
// a change of the provisioner's spec (more slots) retries it.
type NeverFitsError struct {
	// Provisioner is the provisioner's name.
	Provisioner string
	// Slots is what the request asks for; Largest the most the provisioner can ever give.
	Slots, Largest int
	// Limit says what holds Largest, e.g. "its largest host has 4".
	Limit string
	// Raise says how an operator raises Largest, e.g. "raise a host's slots in the
	// provisioner set".
	Raise string
}

func (e *NeverFitsError) Error() string {
	slots := fmt.Sprintf("%d slots", e.Slots)
	if e.Slots == 1 {
		slots = "1 slot"
	}
	return fmt.Sprintf("args.slots: %s can never fit provisioner %q: %s (%s, or ask for at most %d)",
		slots, e.Provisioner, e.Limit, e.Raise, e.Largest)
}
