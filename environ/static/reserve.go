package static

// How the environ's reservations are asked of the slot store: the room each request gives
// its host for the store's check after the write, and the move of a runtime off a host it
// leaves.

import (
	"context"
	"fmt"
	"math"

	"github.com/berth-dev/berth/domain"
)

// checkedPick returns place as the pick of req, and sets req.HostSlots to the room the store
// holds a host's usage row to after the write, for the host as the row spells it: the
// configured host's slots less what rows naming it by another spelling of its URL held when
// place last saw them (reservations written before it was canonical, or by plain SQL), the
// resource's own reservation there aside, which its new one moves. place counts every
// spelling against the host, and so does the check. A reservation that adds slots takes the
// configured spelling (a shrink stays where it is), so the other rows only lose slots, and
// what place saw of them is at least what they hold at the write.
func (e *staticEnviron) checkedPick(req *domain.SlotRequest, place domain.PickHost) domain.PickHost {
	var (
		seen []domain.HostUsage
		own  *domain.Reservation
	)
	req.HostSlots = func(host string) int {
		i, ok := e.place.lookup(host)
		if !ok {
			return 0
		}
		// Another row of the same host: the configured spelling, or another one (only
		// those are parsed, as placement's lookup does).
		other := func(row string) bool {
			j, ok := e.place.lookup(row)
			return ok && j == i && row != host
		}
		room := e.place.hosts[i].Slots
		for _, u := range seen {
			if other(u.Host) {
				room -= u.UsedSlots
			}
		}
		if own != nil && other(own.Host) {
			room += own.Slots
		}
		return room
	}
	return func(req domain.SlotRequest, existing *domain.Reservation, usage []domain.HostUsage) (string, error) {
		seen, own = usage, existing
		return place(req, existing, usage)
	}
}

// move places the runtime of reservation old, whose host it leaves (the host is no longer
// configured, or is down and the runtime unserved: why says which), on another host. The
// slot store hands back a reservation of the requested size without asking the pick policy,
// so the move releases the old reservation and reserves again; when no other host has room,
// the old reservation is put back and the runtime keeps its slots (and its clients their
// host) until room frees up. An agent that dies between release and reservation leaves the
// runtime without one: its generation is still unobserved, so the next reconcile reserves
// again. Nothing is ever held twice: a resource has one reservation. Every slot write of the
// move carries req.Lease, so a move whose lease was fenced meanwhile stops at its first
// refused write.
func (e *staticEnviron) move(ctx context.Context, req domain.SlotRequest, old domain.Reservation, pick domain.PickHost, why string) (domain.Reservation, error) {
	if err := e.slots.ReleaseSlots(ctx, e.name, req.ResourceID, req.Lease); err != nil {
		return domain.Reservation{}, fmt.Errorf("release the reservation on %s, which %s: %w", old.Host, why, err)
	}
	res, err := e.slots.ReserveSlots(ctx, req, pick)
	if err == nil {
		return res, nil
	}
	stay := func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		return old.Host, nil
	}
	// The old host, the only one stay picks, takes back what the runtime held there
	// whatever its slots now (none, once it is no longer configured): no placement gives a
	// leaving host new slots, so putting them back leaves it holding no more than before
	// the release.
	restore := req
	restore.HostSlots = func(string) int { return math.MaxInt32 }
	if _, restoreErr := e.slots.ReserveSlots(ctx, restore, stay); restoreErr != nil {
		return domain.Reservation{}, fmt.Errorf("move off %s, which %s: %w (putting the old reservation back failed too, %v: the next attempt reserves again)", old.Host, why, err, restoreErr)
	}
	return domain.Reservation{}, fmt.Errorf("host %s %s and the runtime keeps its slots there until another host has room: %w", old.Host, why, err)
}
