package static

import (
	"errors"
	"fmt"
	"testing"

	"github.com/berth-dev/berth/domain"
)

func TestPick(t *testing.T) {
	const a, b, c = "http://a:9091", "http://b:9091", "http://c:9091"
	pool := newPlacement("pool", []Runtime{{Host: a, Slots: 10}, {Host: b, Slots: 10}, {Host: c, Slots: 4}})
	type usage = domain.HostUsage
	unserved := func(p placement) placement { p.unserved = true; return p }
	tests := []struct {
		name     string
		place    placement
		slots    int
		existing *domain.Reservation
		usage    []usage
		want     string // the host, or the error's message
		noRoom   bool   // want an error wrapping domain.ErrNoCapacity
		never    int    // want a *domain.NeverFitsError naming this largest size
	}{{
		name: "empty pool: most free, then config order", place: pool, slots: 1,
		want: a,
	}, {
		name: "most free slots", place: pool, slots: 2,
		usage: []usage{{Host: a, UsedSlots: 5}, {Host: b, UsedSlots: 3}},
		want:  b,
	}, {
		name: "spread an owner before filling the freest host", place: pool, slots: 2,
		usage: []usage{{Host: a, UsedSlots: 1, OwnerResources: 1}, {Host: b, UsedSlots: 8}, {Host: c, UsedSlots: 4}},
		want:  b,
	}, {
		name: "fewest of the owner's resources wins over free slots", place: pool, slots: 1,
		usage: []usage{{Host: a, OwnerResources: 2}, {Host: b, UsedSlots: 5, OwnerResources: 1}, {Host: c, UsedSlots: 3, OwnerResources: 1}},
		want:  b,
	}, {
		name: "owner's host when the others are full", place: pool, slots: 3,
		usage: []usage{{Host: a, UsedSlots: 2, OwnerResources: 1}, {Host: b, UsedSlots: 9}, {Host: c, UsedSlots: 2}},
		want:  a,
	}, {
		name: "exactly full fits", place: pool, slots: 4,
		usage: []usage{{Host: a, UsedSlots: 10}, {Host: b, UsedSlots: 10}},
		want:  c,
	}, {
		name: "no host has room", place: pool, slots: 4,
		usage:  []usage{{Host: a, UsedSlots: 8}, {Host: b, UsedSlots: 9}, {Host: c, UsedSlots: 3}},
		want:   `no host of provisioner "pool" has 4 free slots (largest free: 2 on http://a:9091)`,
		noRoom: true,
	}, {
		name: "full pool", place: pool, slots: 1,
		usage:  []usage{{Host: a, UsedSlots: 10}, {Host: b, UsedSlots: 11}, {Host: c, UsedSlots: 4}},
		want:   `no host of provisioner "pool" has 1 free slot (largest free: 0 on http://a:9091)`,
		noRoom: true,
	}, {
		name: "hosts no longer configured take nothing new", place: newPlacement("pool", []Runtime{{Host: b, Slots: 2}}), slots: 1,
		usage: []usage{{Host: "http://old:9091"}, {Host: b, UsedSlots: 1, OwnerResources: 1}},
		want:  b,
	}, {
		name: "usage spelled differently still counts", place: newPlacement("pool", []Runtime{{Host: b, Slots: 3}, {Host: a, Slots: 3}}), slots: 2,
		usage: []usage{{Host: "HTTP://A:9091/", UsedSlots: 1}, {Host: "http://b:9091", UsedSlots: 1}, {Host: "http://b:9091/", UsedSlots: 1}},
		want:  a,
	}, {
		name: "down hosts take nothing new", place: pool.withDown([]string{a}), slots: 1,
		want: b,
	}, {
		name: "down hosts are named when nothing fits", place: pool.withDown([]string{b}), slots: 5,
		usage:  []usage{{Host: a, UsedSlots: 6}},
		want:   `no host of provisioner "pool" has 5 free slots (largest free: 4 on http://a:9091); down: http://b:9091`,
		noRoom: true,
	}, {
		name: "every host down", place: pool.withDown([]string{a, b, c}), slots: 1,
		want:   `no host of provisioner "pool" is up (down: http://a:9091, http://b:9091, http://c:9091)`,
		noRoom: true,
	}, {
		name: "a resize stays on its host while it is down", place: pool.withDown([]string{a}), slots: 3,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 2},
		usage:    []usage{{Host: a, UsedSlots: 2}},
		want:     a,
	}, {
		name: "an unserved runtime's resize leaves its down host", place: unserved(pool.withDown([]string{a})), slots: 3,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 2},
		usage:    []usage{{Host: a, UsedSlots: 2}, {Host: b, UsedSlots: 1}},
		want:     b,
	}, {
		name: "an unserved runtime stays on its down host when no host that is up has room", place: unserved(pool.withDown([]string{a, c})), slots: 3,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 2},
		usage:    []usage{{Host: a, UsedSlots: 2}, {Host: b, UsedSlots: 8}},
		want:     `no host of provisioner "pool" has 3 free slots (largest free: 2 on http://b:9091); down: http://a:9091, http://c:9091`,
		noRoom:   true,
	}, {
		name: "an unserved runtime's resize stays on a host that is up", place: unserved(pool.withDown([]string{b})), slots: 3,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 2},
		usage:    []usage{{Host: a, UsedSlots: 2}},
		want:     a,
	}, {
		name: "resize in place", place: pool, slots: 8,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 2},
		usage:    []usage{{Host: a, UsedSlots: 4, OwnerResources: 1}},
		want:     a,
	}, {
		name: "resize to exactly full", place: pool, slots: 8,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 2},
		usage:    []usage{{Host: a, UsedSlots: 4}},
		want:     a,
	}, {
		name: "resize refused rather than moved", place: pool, slots: 8,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 2},
		usage:    []usage{{Host: a, UsedSlots: 9}},
		want:     "host http://a:9091 has 1 free slot; resize from 2 to 8 slots needs 6",
		noRoom:   true,
	}, {
		name: "shrink stays even on an overfull host", place: pool, slots: 1,
		existing: &domain.Reservation{ResourceID: "r", Host: c, Slots: 3},
		usage:    []usage{{Host: c, UsedSlots: 7}},
		want:     c,
	}, {
		name: "shrink on a removed host moves to a configured one", place: pool, slots: 1,
		existing: &domain.Reservation{ResourceID: "r", Host: "http://old:9091", Slots: 2},
		usage:    []usage{{Host: "http://old:9091", UsedSlots: 2}, {Host: a, UsedSlots: 10}, {Host: b, UsedSlots: 3}},
		want:     b,
	}, {
		name: "grow on a removed host moves to a configured one", place: pool, slots: 3,
		existing: &domain.Reservation{ResourceID: "r", Host: "HTTP://OLD:9091/", Slots: 2},
		usage:    []usage{{Host: "http://old:9091", UsedSlots: 2}, {Host: b, UsedSlots: 8}},
		want:     a,
	}, {
		name: "a removed host's runtime waits when no configured host has room", place: pool, slots: 5,
		existing: &domain.Reservation{ResourceID: "r", Host: "http://old:9091", Slots: 2},
		usage:    []usage{{Host: "http://old:9091", UsedSlots: 2}, {Host: a, UsedSlots: 6}, {Host: b, UsedSlots: 7}},
		want:     `no host of provisioner "pool" has 5 free slots (largest free: 4 on http://a:9091)`,
		noRoom:   true,
	}, {
		name: "a host cut below its usage keeps a shrinking runtime", place: newPlacement("pool", []Runtime{{Host: a, Slots: 2}, {Host: b, Slots: 10}}), slots: 2,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 3},
		usage:    []usage{{Host: a, UsedSlots: 5}},
		want:     a,
	}, {
		name: "a host cut below its usage takes no growth", place: newPlacement("pool", []Runtime{{Host: a, Slots: 4}, {Host: b, Slots: 10}}), slots: 4,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 3},
		usage:    []usage{{Host: a, UsedSlots: 5}},
		want:     "host http://a:9091 has 0 free slots; resize from 3 to 4 slots needs 1",
		noRoom:   true,
	}, {
		name: "a host cut below its usage takes nothing new", place: newPlacement("pool", []Runtime{{Host: a, Slots: 2}, {Host: b, Slots: 10}}), slots: 1,
		usage: []usage{{Host: a, UsedSlots: 5}, {Host: b, UsedSlots: 9, OwnerResources: 3}},
		want:  b,
	}, {
		name: "more slots than the largest host has never fit", place: pool, slots: 11,
		want:  `args.slots: 11 slots can never fit provisioner "pool": its largest host has 10 (raise a host's slots in the provisioner set, or ask for at most 10)`,
		never: 10,
	}, {
		name: "a full pool still fits what its largest host has", place: pool, slots: 10,
		usage:  []usage{{Host: a, UsedSlots: 10}, {Host: b, UsedSlots: 10}},
		want:   `no host of provisioner "pool" has 10 free slots (largest free: 4 on http://c:9091)`,
		noRoom: true,
	}, {
		name: "a down host may come back, so its slots count", place: pool.withDown([]string{a, b}), slots: 5,
		want:   `no host of provisioner "pool" has 5 free slots (largest free: 4 on http://c:9091); down: http://a:9091, http://b:9091`,
		noRoom: true,
	}, {
		name: "a host no longer configured counts for nothing", place: newPlacement("pool", []Runtime{{Host: c, Slots: 4}}), slots: 5,
		existing: &domain.Reservation{ResourceID: "r", Host: a, Slots: 2},
		usage:    []usage{{Host: a, UsedSlots: 2}},
		want:     `args.slots: 5 slots can never fit provisioner "pool": its largest host has 4 (raise a host's slots in the provisioner set, or ask for at most 4)`,
		never:    4,
	}, {
		name: "a resize past all its host has never fits, as a runtime does not move", place: pool, slots: 6,
		existing: &domain.Reservation{ResourceID: "r", Host: c, Slots: 2},
		usage:    []usage{{Host: c, UsedSlots: 2}},
		want: `args.slots: 6 slots can never fit provisioner "pool": the runtime's host http://c:9091 has 4, and a runtime does not move between hosts ` +
			`(raise the slots of http://c:9091 in the provisioner set, or ask for at most 4)`,
		never: 4,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := domain.SlotRequest{Provisioner: "pool", ResourceID: "r", Owner: "o", Slots: tt.slots}
			host, err := tt.place.pick(req, tt.existing, tt.usage)
			if tt.never > 0 {
				var nf *domain.NeverFitsError
				if !errors.As(err, &nf) || errors.Is(err, domain.ErrNoCapacity) {
					t.Fatalf("pick = %q, %v; want a NeverFitsError, not a wait for capacity", host, err)
				}
				if nf.Largest != tt.never || nf.Slots != tt.slots || err.Error() != tt.want {
					t.Errorf("error = %q (largest %d), want %q (largest %d)", err, nf.Largest, tt.want, tt.never)
				}
				return
			}
			if tt.noRoom {
				if !errors.Is(err, domain.ErrNoCapacity) {
					t.Fatalf("pick = %q, %v; want an error wrapping ErrNoCapacity", host, err)
				}
				if err.Error() != tt.want {
					t.Errorf("error = %q, want %q", err, tt.want)
				}
				return
			}
			if err != nil || host != tt.want {
				t.Errorf("pick = %q, %v; want %q", host, err, tt.want)
			}
		})
	}
}

// TestPickAllocatesTheSameForAnyNumberOfHosts: pick runs for every reservation, inside its
// transaction, with the usage of every host; usage spelled as the hosts are configured is
// read without parsing a URL per host, so what pick allocates does not grow with the pool.
func TestPickAllocatesTheSameForAnyNumberOfHosts(t *testing.T) {
	allocs := func(hosts int) float64 {
		var rts []Runtime
		var usage []domain.HostUsage
		for i := range hosts {
			host := fmt.Sprintf("http://host-%d:9091", i)
			rts = append(rts, Runtime{Host: host, Slots: 10})
			usage = append(usage, domain.HostUsage{Host: host, UsedSlots: i % 10, OwnerResources: i % 3})
		}
		pool := newPlacement("pool", rts)
		req := domain.SlotRequest{Provisioner: "pool", ResourceID: "r", Owner: "o", Slots: 1}
		return testing.AllocsPerRun(20, func() {
			if _, err := pool.pick(req, nil, usage); err != nil {
				t.Fatal(err)
			}
		})
	}
	if few, many := allocs(4), allocs(200); many > few {
		t.Errorf("pick allocates %v times over 4 hosts and %v over 200; want no more for more hosts", few, many)
	}
}
