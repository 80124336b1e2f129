//go:build k8s

package k8s_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// fairBurst is owner A's burst in BenchmarkFairness: three times the other benchmarks' 100,
// minutes of the agent's applies behind which, in change order, owner B's runtime would wait.
const fairBurst = 300

// BenchmarkFairness measures, through the real agent with its default settings, owner B's
// runtime insert-to-ready on the idle agent, then owner A's burst of 300 runtimes inserted in
// one statement and B's runtime 0.3 s later: B's insert-to-ready behind the burst, against
// the target of twice its idle time plus one rollout (the median rollout of A's runtimes
// ready by then), and how many of A's runtimes were ready before B's. The local cluster's
// two nodes hold 220 pods, so A's burst is never all ready there: only B is waited for, and
// the run needs the cluster otherwise empty.
func BenchmarkFairness(b *testing.B) {
	cs := clientset(b)
	for b.Loop() {
		b.StopTimer()
		quiesce(b, cs)
		ns := namespace(b, cs)
		e := e2etest.New(b, provisionerSet(benchSpec(b, ns)))
		agent := e.StartAgent("bench-k8s-fair")
		b.StartTimer()

		insert := func(prefix, owner string, n int) {
			if _, err := e.Pool.Exec(context.Background(), `
				INSERT INTO resources (type, name, owner, args)
				SELECT 'runtime', $1 || '-' || i, $3, '{"slots": 1}'::jsonb FROM generate_series(1, $2) AS i`,
				prefix, n, owner); err != nil {
				b.Fatal(err)
			}
		}
		insertToReady := func(name string) float64 {
			var s float64
			if err := e.Pool.QueryRow(context.Background(), `
				SELECT extract(epoch FROM ready_at - created_at)::float8 FROM resources WHERE name = $1`, name).Scan(&s); err != nil {
				b.Fatal(err)
			}
			return s
		}

		insert("fair-idle", "owner-b", 1)
		e.WaitCount("B's idle runtime ready", 5*time.Minute, 1, `SELECT count(*) FROM resources WHERE name = 'fair-idle-1' AND status = 'ready'`)
		idle := insertToReady("fair-idle-1")

		began := time.Now()
		insert("fair-a", "owner-a", fairBurst)
		time.Sleep(time.Until(began.Add(300 * time.Millisecond)))
		insert("fair-b", "owner-b", 1)
		e.WaitCount("B's runtime ready behind the burst", 10*time.Minute, 1, `SELECT count(*) FROM resources WHERE name = 'fair-b-1' AND status = 'ready'`)
		late := insertToReady("fair-b-1")

		b.StopTimer()
		var ahead int
		var rollout float64
		if err := e.Pool.QueryRow(context.Background(), `
			WITH b AS (SELECT ready_at FROM resources WHERE name = 'fair-b-1'),
			     rollouts AS (
			       SELECT extract(epoch FROM max(at) FILTER (WHERE status = 'ready')
			                               - max(at) FILTER (WHERE message LIKE '%waiting for it to serve'))::float8 AS s
			         FROM resource_events WHERE kind = 'status' GROUP BY resource_id)
			SELECT (SELECT count(*) FROM resources, b WHERE name LIKE 'fair-a-%' AND resources.ready_at < b.ready_at),
			       coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) FROM rollouts WHERE s IS NOT NULL), 0)`).Scan(&ahead, &rollout); err != nil {
			b.Fatal(err)
		}
		// B's own phases: from its insert to its claim, to its objects applied, to ready.
		var claimed, applied float64
		if err := e.Pool.QueryRow(context.Background(), `
			SELECT coalesce(extract(epoch FROM min(ev.at) FILTER (WHERE ev.status = 'provisioning') - r.created_at)::float8, 0),
			       coalesce(extract(epoch FROM max(ev.at) FILTER (WHERE ev.message LIKE '%waiting for it to serve') - r.created_at)::float8, 0)
			  FROM resources r JOIN resource_events ev ON ev.resource_id = r.id AND ev.kind = 'status'
			 WHERE r.name = 'fair-b-1' GROUP BY r.created_at`).Scan(&claimed, &applied); err != nil {
			b.Fatal(err)
		}
		target := 2*idle + rollout
		met := "met"
		if late > target {
			met = "MISSED"
		}
		b.ReportMetric(idle, "s-b-idle")
		b.ReportMetric(late, "s-b-behind-burst")
		fmt.Printf("kubernetes fairness: B ready %.2fs after insert behind A's %d (claimed at %.2fs, applied at %.2fs; idle %.2fs; %d of A's ready first); target 2x idle + one rollout (%.2fs) = %.2fs: %s\n",
			late, fairBurst, claimed, applied, idle, ahead, rollout, target, met)
		endRound(b, cs, ns, agent)
		b.StartTimer()
	}
}
