// Package k8s drives the kubernetes environ and the real berth binary against a real
// Kubernetes control plane and a real PostgreSQL: it provisions runtimes concurrently, resizes
// (and refuses to shrink a volume), upgrades, repairs objects deleted out of band, sweeps
// orphans, provisions ClickHouse with its password kept out of status and logs, reports why an
// unschedulable rollout is not ready, kills the agent with SIGKILL mid-rollout and checks that
// the restarted agent converges, and that deprovisioning leaves nothing behind while objects
// without Berth's labels are untouched. With three agents on one database it kills one with
// SIGKILL mid-rollout and never restarts it: the others take its runtimes over once it is not
// live, and every runtime is ready with each of its objects created once. Its benchmarks time 100 runtimes from insert to ready
// through the agent and count the objects applied per second, and time 20 hibernated runtimes from
// wake to ready. TestHibernateAndWake hibernates a runtime (replicas 0, claim kept) and wakes it on
// the same claim.
//
// The files carry the build tag k8s and need BERTH_KUBECONFIG (the admin kubeconfig of the
// cluster, as scripts/k8s/up.sh prints it) and BERTH_TEST_DATABASE_URL; without them the tests
// fail. The binary is BERTH_BINARY when set; otherwise it is built. The harness is
// internal/e2etest's.
//
//	make e2e-k8s     the tests
//	make bench-k8s   the benchmarks, three rounds each (go test -tags k8s -run '^$' -bench . -benchtime 3x)
package k8s
