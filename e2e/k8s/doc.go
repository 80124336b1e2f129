// Package k8s drives the kubernetes environ and the real berth binary against a real
// Kubernetes cluster and a real PostgreSQL: it provisions runtimes and a ClickHouse resource,
// resizes, upgrades, repairs drift, sweeps orphans, kills the agent mid-rollout and checks
// that everything converges and that deprovisioning leaves nothing behind.
//
// The tests carry the build tag k8s and need BERTH_KUBECONFIG (the admin kubeconfig of the
// cluster, as the local cluster scripts print it) and BERTH_TEST_DATABASE_URL; without them
// they fail. The binary is BERTH_BINARY when set; otherwise the tests build it.
//
//	BERTH_KUBECONFIG=$(scripts/k8s/up.sh | tail -n1) go test -tags k8s ./e2e/k8s/
//	... go test -tags k8s -run '^$' -bench . -benchtime 1x ./e2e/k8s/   (throughput figures)
package k8s
