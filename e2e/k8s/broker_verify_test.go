//go:build k8s

package k8s_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/external"
	berthk8s "github.com/berth-dev/berth/environ/kubernetes"
)

// TestTheKubernetesBrokerPassesVerifyThroughTheAdapter holds the built-in kubernetes broker,
// on the local control plane, to the out-of-process brokers' contract: served through
// external.Adapter, it passes the conformance suite (berth broker verify's), hibernate and
// wake included, for the built-in runtime and clickhouse types and for the example redis
// type its spec defines, and leaves no object behind.
func TestTheKubernetesBrokerPassesVerifyThroughTheAdapter(t *testing.T) {
	cs := clientset(t)
	for _, tc := range []struct {
		typ   string
		extra string
		args  map[string]any
	}{
		{typ: "runtime", args: map[string]any{}},
		{typ: "clickhouse", args: map[string]any{}},
		{typ: "redis", extra: `, "types": ` + redisTypes(t), args: map[string]any{"memory_mb": 128}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			ns := namespace(t, cs)
			env, err := berthk8s.New(provisioner, json.RawMessage(kubeSpec(t, ns, 90, tc.extra)), environ.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			srv := httptest.NewServer(&external.Adapter{Env: env, Types: []domain.ResourceType{domain.ResourceType(tc.typ)}})
			defer srv.Close()
			// A hibernate call waits for the workload's pods to go (timeout_seconds, 90): the
			// call's own deadline is longer.
			spec, _ := json.Marshal(map[string]any{"types": []string{tc.typ}, "hibernate": true, "url": srv.URL, "call_timeout_seconds": 120})
			results, err := external.Verify(context.Background(), spec, external.VerifyConfig{Type: tc.typ, Args: tc.args, ReadyTimeout: 2 * time.Minute}, environ.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			ran := map[string]bool{}
			for _, r := range results {
				ran[r.Name] = true
				if !r.Passed {
					t.Errorf("FAIL %s: %s", r.Name, r.Detail)
				}
			}
			for _, name := range []string{"handshake", "reconcile-idempotent", "await-ready", "check-resource", "stale-lease-refused",
				"invalid-args-permanent", "deadline-passed-refused", "cancellation", "hibernate-and-wake", "deprovision-missing"} {
				if !ran[name] {
					t.Errorf("check %s did not run (results %+v)", name, results)
				}
			}
			waitGone(t, cs, ns, time.Minute)
		})
	}
}
