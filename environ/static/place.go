package static

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/domain"
)

// placement is the static environ's pick policy over its configured hosts. Its pick method is
// a domain.PickHost: the slot store calls it inside the reservation's transaction with the
// committed usage of every host, so it is pure and does no I/O.
type placement struct {
	provisioner string
	hosts       []Runtime // canonical hosts, in config order
	// index is the position of each of hosts in hosts: pick reads every host's usage for
	// every reservation, inside the reservation's transaction, so a host spelled as
	// configured is found without parsing it.
	index map[string]int
	// down are the canonical hosts not known to be up (failing their health probe, or
	// never answered): they take nothing new.
	down []string
	// unserved says the runtime has not been handed to clients yet, so a down host it is
	// on does not keep it: it is placed like a new one.
	unserved bool
	// preferred is the canonical host a woken runtime had before it hibernated ("" for
	// none): a new reservation goes there when it is configured, up and has room.
	preferred string
}

// newPlacement returns the pick policy over hosts, canonical and in config order.
func newPlacement(provisioner string, hosts []Runtime) placement {
	index := make(map[string]int, len(hosts))
	for i, rt := range hosts {
		index[rt.Host] = i
	}
	return placement{provisioner: provisioner, hosts: hosts, index: index}
}

// lookup returns the position in p.hosts of host, however spelled, and false when it is not
// configured.
func (p placement) lookup(host string) (int, bool) {
	if i, ok := p.index[host]; ok {
		return i, true
	}
	i, ok := p.index[canonicalOr(host)]
	return i, ok
}

// withDown returns p with the given hosts down.
func (p placement) withDown(down []string) placement {
	p.down = down
	return p
}

// pick chooses the host for req.
//
// A request for more slots than the largest configured host has (up or down: a host that is
// down may come back) can never be placed: it is a *domain.NeverFitsError, not a wait for
// room. A new reservation goes to a host with room for req.Slots, preferring the host holding the
// fewest of the owner's resources (spreading an owner across hosts), then the host with the
// most free slots, then the host listed first. A resize stays on the resource's host when the
// host has room (a shrink always does) and is refused otherwise: a runtime does not move
// between configured hosts. A resource whose host is no longer configured, and an unserved
// one whose host is down, is placed like a new one. Hosts no longer configured, and hosts
// that are down, take no new slots.
func (p placement) pick(req domain.SlotRequest, existing *domain.Reservation, usage []domain.HostUsage) (string, error) {
	// The usage of each configured host, by its position in p.hosts; hosts no longer
	// configured take nothing, so their usage is not needed.
	used := make([]domain.HostUsage, len(p.hosts))
	for _, u := range usage {
		if i, ok := p.lookup(u.Host); ok {
			used[i].UsedSlots += u.UsedSlots
			used[i].OwnerResources += u.OwnerResources
		}
	}
	if existing != nil && p.leaving(existing.Host) == "" {
		return p.resize(req, existing, used)
	}
	if largest := p.largestHost(); req.Slots > largest {
		return "", &domain.NeverFitsError{Provisioner: p.provisioner, Slots: req.Slots, Largest: largest,
			Limit: fmt.Sprintf("its largest host has %d", largest), Raise: "raise a host's slots in the provisioner set"}
	}

	if existing == nil && p.preferred != "" && p.notTaking(p.preferred) == "" {
		if i, _ := p.lookup(p.preferred); p.hosts[i].Slots-used[i].UsedSlots >= req.Slots {
			return p.hosts[i].Host, nil
		}
	}

	type candidate struct {
		host        string
		free, owned int
		order       int
	}
	candidates := make([]candidate, 0, len(p.hosts))
	largest := candidate{free: -1}
	for i, rt := range p.hosts {
		if containsString(p.down, rt.Host) {
			continue
		}
		u := used[i]
		c := candidate{host: rt.Host, free: rt.Slots - u.UsedSlots, owned: u.OwnerResources, order: i}
		if c.free > largest.free {
			largest = c
		}
		if c.free >= req.Slots {
			candidates = append(candidates, c)
		}
	}
	if len(candidates) == 0 {
		if largest.host == "" {
			return "", noCapacity("no host of provisioner %q is up (down: %s)", p.provisioner, strings.Join(p.down, ", "))
		}
		msg := fmt.Sprintf("no host of provisioner %q has %s (largest free: %d on %s)",
			p.provisioner, count(req.Slots, "free slot"), max(largest.free, 0), largest.host)
		if len(p.down) > 0 {
			msg += "; down: " + strings.Join(p.down, ", ")
		}
		return "", noCapacity("%s", msg)
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		if a.owned != b.owned {
			return a.owned < b.owned
		}
		if a.free != b.free {
			return a.free > b.free
		}
		return a.order < b.order
	})
	return candidates[0].host, nil
}

// largestHost is the most slots a configured host has.
func (p placement) largestHost() int {
	largest := 0
	for _, rt := range p.hosts {
		largest = max(largest, rt.Slots)
	}
	return largest
}

// resize keeps existing, on a configured host, where it is when that host has room for
// req; used is the usage of each configured host by its position in p.hosts. A runtime
// does not move between hosts, so a size its host does not have in all never fits.
func (p placement) resize(req domain.SlotRequest, existing *domain.Reservation, used []domain.HostUsage) (string, error) {
	if req.Slots <= existing.Slots {
		return existing.Host, nil
	}
	var capacity, inUse int
	host := existing.Host
	if i, ok := p.lookup(existing.Host); ok {
		capacity, inUse, host = p.hosts[i].Slots, used[i].UsedSlots, p.hosts[i].Host
	}
	if req.Slots > capacity {
		return "", &domain.NeverFitsError{Provisioner: p.provisioner, Slots: req.Slots, Largest: capacity,
			Limit: fmt.Sprintf("the runtime's host %s has %d, and a runtime does not move between hosts", existing.Host, capacity),
			Raise: fmt.Sprintf("raise the slots of %s in the provisioner set", existing.Host)}
	}
	// usage counts the resource's own slots; the resize needs only the difference.
	free := capacity - inUse
	need := req.Slots - existing.Slots
	if free < need {
		return "", noCapacity("host %s has %s; resize from %d to %s needs %d",
			existing.Host, count(max(free, 0), "free slot"), existing.Slots, count(req.Slots, "slot"), need)
	}
	// The host as configured: a reservation that grows under another spelling of its URL
	// moves to this one, so that the other spellings' rows only lose slots and the store's
	// check of the host's room after the write (checkedPick) counts them as the pick did.
	return host, nil
}

// configured reports whether host, however spelled, is one of the pool's hosts.
func (p placement) configured(host string) bool {
	_, ok := p.lookup(host)
	return ok
}

// leaving says why the runtime is placed again off host, the host it holds slots on ("is no
// longer configured", or "is down" for an unserved runtime), or "" when it stays there.
func (p placement) leaving(host string) string {
	switch {
	case !p.configured(host):
		return "is no longer configured"
	case p.unserved && containsString(p.down, canonicalOr(host)):
		return "is down"
	}
	return ""
}

// notTaking says why host takes no new runtime whatever its room ("is no longer
// configured", "is down"), or "" when it is configured and up.
func (p placement) notTaking(host string) string {
	switch {
	case !p.configured(host):
		return "is no longer configured"
	case containsString(p.down, canonicalOr(host)):
		return "is down"
	}
	return ""
}

// canonicalOr returns host in canonical form, or as it is when it is no URL.
func canonicalOr(host string) string {
	if canonical, err := canonicalURL(host); err == nil {
		return canonical
	}
	return host
}

// capacityError is a placement refusal; it wraps domain.ErrNoCapacity so the worker waits for
// room instead of failing the resource.
type capacityError struct{ msg string }

func (e *capacityError) Error() string { return e.msg }
func (e *capacityError) Unwrap() error { return domain.ErrNoCapacity }

func noCapacity(format string, args ...any) error {
	return &capacityError{msg: fmt.Sprintf(format, args...)}
}

// count returns "1 slot", "2 slots" and the like.
func count[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
