package main

import (
	"context"

	"github.com/berth-dev/berth/domain"
)

// slotUnit is the unit of the pools whose capacity is their slot reservations.
const slotUnit = "slots"

// reservedByHost reads what a pool's slot reservations hold now.
type reservedByHost interface {
	ReservedByHost(ctx context.Context, provisioner string) ([]domain.HostReservations, error)
}

// withLiveSlots returns latest with the used slots of every pool counted in slots read from
// its reservations now rather than from the agent's last sample: the reservations are what
// the agent samples (a static pool's per host, a Kubernetes slot quota's in all), and a
// sample is up to a --capacity-interval old, so a runtime just created or deleted would not
// show in it yet. Totals and down hosts stay as sampled: only the agent knows them.
func withLiveSlots(ctx context.Context, st reservedByHost, latest []domain.CapacitySample) ([]domain.CapacitySample, error) {
	live := make(map[string]map[string]int64) // provisioner -> host -> slots reserved
	out := make([]domain.CapacitySample, len(latest))
	for i, s := range latest {
		out[i] = s
		if s.Unit != slotUnit {
			continue
		}
		byHost, ok := live[s.Provisioner]
		if !ok {
			reserved, err := st.ReservedByHost(ctx, s.Provisioner)
			if err != nil {
				return nil, err
			}
			byHost = make(map[string]int64, len(reserved)+1)
			for _, r := range reserved {
				byHost[r.Host] += r.Slots
				byHost[""] += r.Slots // the pool's total
			}
			live[s.Provisioner] = byHost
		}
		out[i].Used = byHost[s.Host]
	}
	return out, nil
}
