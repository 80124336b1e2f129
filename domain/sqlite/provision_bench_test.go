package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// BenchmarkProvisionStatic makes the store's writes of one static runtime's way from pending
// to ready, as the agent makes them (claim and start, slot reservation, the record of its
// state, ready and release), for many resources at once. cpu-ms/op is the process's CPU
// time per resource: on a busy machine a steadier figure than the time per resource.
func BenchmarkProvisionStatic(b *testing.B) {
	ctx := context.Background()
	st := openState(b, filepath.Join(b.TempDir(), "berth.db"))
	if _, err := st.DB().ExecContext(ctx, `
		INSERT INTO resources (type, name, owner, args)
		WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $1 - 1)
		SELECT 'runtime', 'r-' || i, 'owner-' || (i % 50), '{"slots":1}' FROM n`, b.N); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 0, b.N)
	rows, err := st.DB().QueryContext(ctx, `SELECT id FROM resources ORDER BY id`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		b.Fatal(err)
	}
	hosts := make([]string, 12)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("http://host-%02d:9091", i)
	}
	var next atomic.Int64
	pick := func(req domain.SlotRequest, _ *domain.Reservation, _ []domain.HostUsage) (string, error) {
		return hosts[next.Add(1)%int64(len(hosts))], nil
	}
	start := domain.ProvisioningStart{Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}}
	var i atomic.Int64
	b.SetParallelism(8) // 16 writers on 2 cores: the agent's default concurrency
	cpu0 := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := ids[i.Add(1)-1]
			c, err := st.ClaimAndStart(ctx, id, "agent", time.Minute, start)
			if err != nil || !c.Started {
				b.Errorf("claim %s: %v (started %v)", id, err, c.Started)
				return
			}
			res, err := st.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: id, Owner: c.Resource.Owner, Slots: 1, Lease: &c.Lease}, pick)
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
			u.Status, u.StatusMessage, u.ObservedGeneration, u.ReleaseLease = domain.StatusReady, "ready", &observed, true
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

// cpuTime is the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
