package sqlite_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/sqlite"
)

// BenchmarkProvisionStatic makes the store's writes of one static runtime's way from pending
// to ready, as the agent makes them (claim and start, slot reservation, the record of its
// state, ready and release), for many resources at once. cpu-ms/op is the process's CPU
// time per resource: on a busy machine a steadier figure than the time per resource.
func BenchmarkProvisionStatic(b *testing.B) {
	ctx := context.Background()
	st := openState(b, filepath.Join(b.TempDir(), "berth.db"))
	todo, pick := pendingRuntimes(b, st)
	start := domain.ProvisioningStart{Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}}
	var i atomic.Int64
	b.SetParallelism(8) // 16 writers on 2 cores: the agent's default concurrency
	cpu0 := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := todo[i.Add(1)-1].id
			c, err := st.ClaimAndStart(ctx, id, "agent", time.Minute, start)
			if err != nil || !c.Started {
				b.Errorf("claim %s: %v (started %v)", id, err, c.Started)
				return
			}
			res, err := st.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: id, Owner: c.Resource.Owner, Slots: 1, Lease: &c.Lease, HostSlots: func(string) int { return math.MaxInt32 }}, pick)
			if err != nil {
				b.Error(err)
				return
			}
			u := domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning,
				StatusMessage: "provisioning generation 1: waiting for it to serve", State: map[string]any{"host": res.Host}}
			if _, err := st.RecordProgress(ctx, id, c.Lease, u); err != nil {
				b.Error(err)
				return
			}
			observed := int64(1)
			u.Status, u.Reason, u.StatusMessage, u.ObservedGeneration, u.ReleaseLease = domain.StatusReady, domain.ReasonAvailable, "ready", &observed, true
			u.Config = map[string]any{"url": res.Host}
			if _, err := st.RecordProgress(ctx, id, c.Lease, u); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// pendingRuntime is a runtime the benchmark provisions.
type pendingRuntime struct{ id, owner string }

// pendingRuntimes inserts b.N pending runtimes of 50 owners, as a client's one INSERT would,
// and returns them in id order, with a host picker that spreads them over 12 hosts in turn.
func pendingRuntimes(b *testing.B, st *sqlite.State) ([]pendingRuntime, domain.PickHost) {
	ctx := context.Background()
	if _, err := st.DB().ExecContext(ctx, `
		INSERT INTO resources (type, name, owner, args)
		WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $1 - 1)
		SELECT 'runtime', 'r-' || i, 'owner-' || (i % 50), '{"slots":1}' FROM n`, b.N); err != nil {
		b.Fatal(err)
	}
	todo := make([]pendingRuntime, 0, b.N)
	rows, err := st.DB().QueryContext(ctx, `SELECT id, owner FROM resources ORDER BY id`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var r pendingRuntime
		if err := rows.Scan(&r.id, &r.owner); err != nil {
			b.Fatal(err)
		}
		todo = append(todo, r)
	}
	if err := rows.Close(); err != nil {
		b.Fatal(err)
	}
	hosts := make([]string, 12)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("http://host-%02d:9091", i)
	}
	var next atomic.Int64
	return todo, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		return hosts[next.Add(1)%int64(len(hosts))], nil
	}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProvisionInstant makes the one write of a static runtime provisioned in one
// transaction (SlotRequest.Instant), as the agent makes it, for many resources at once: 256
// writers, the agent's concurrency ceiling, so that the group commit carries groups as large
// as the agent's. cpu-ms/op is the process's CPU time per resource.
func BenchmarkProvisionInstant(b *testing.B) {
	ctx := context.Background()
	st := openState(b, filepath.Join(b.TempDir(), "berth.db"))
	todo, pick := pendingRuntimes(b, st)
	steps := []domain.StatusStep{
		{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, Message: domain.ProvisioningMessage(1)},
		{Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady, Message: domain.ProvisioningMessage(1) + ": waiting for it to serve"},
	}
	var i atomic.Int64
	b.SetParallelism(128) // 256 writers on 2 cores
	cpu0 := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := todo[i.Add(1)-1]
			in := &domain.InstantProvision{
				Generation: 1, Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}, Units: 1,
				Steps: steps, Message: domain.ReadyMessage(1, ""),
				Ready: func(res domain.Reservation) (domain.ReadyRecord, error) {
					return domain.ReadyRecord{State: map[string]any{"host": res.Host}, Config: map[string]any{"url": res.Host}}, nil
				},
			}
			req := domain.SlotRequest{Provisioner: "pool", ResourceID: r.id, Owner: r.owner, Slots: 1, Instant: in, HostSlots: func(string) int { return math.MaxInt32 }}
			if _, err := st.ReserveSlots(ctx, req, pick); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
