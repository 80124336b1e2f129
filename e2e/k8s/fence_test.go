//go:build k8s

package k8s_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/e2etest"
)

// TestSlotQuotaAcrossAgents: two agents on one database and one provisioner with a slot
// quota of 4, asked for 3 + 3 slots at once (one INSERT): one runtime is applied and becomes
// ready, the other waits for capacity with the quota's numbers in its status and has no
// object in the cluster. Deleting the first lets the second in.
func TestSlotQuotaAcrossAgents(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	e := e2etest.New(t, provisionerSet(kubeSpec(t, ns, 90, `, "slot_quota": 4`)))
	names := []string{"agent-one", "agent-two"}
	agents := make([]*e2etest.Agent, len(names))
	for i, name := range names {
		agents[i] = startAgentAs(e, name, failoverFlags...)
	}
	waitAgentsLive(t, e, names...)

	if _, err := e.SQL.ExecContext(ctx, `
		INSERT INTO resources (type, name, owner, args)
		SELECT 'runtime', 'quota-' || i, 'team-a', '{"slots": 3}'::jsonb FROM generate_series(1, 2) AS i`); err != nil {
		t.Fatal(err)
	}
	var ready, waiting string
	e.Eventually("one runtime ready, the other waiting for capacity", readyWithin, func() (bool, string) {
		ready, waiting = "", ""
		for _, id := range resourceIDs(t, e) {
			switch r := e.Get(id); {
			case r.Status == "ready":
				ready = id
			case r.Status == "pending" && strings.HasPrefix(r.StatusMessage, "waiting for capacity"):
				waiting = id
			}
		}
		return ready != "" && waiting != "", e.StatusCounts()
	})
	msg := e.Get(waiting).StatusMessage
	t.Logf("waiting: %s", msg)
	if !strings.Contains(msg, fmt.Sprintf("slot quota of provisioner %q: 3 of 4 slots in use, 3 more wanted", provisioner)) {
		t.Errorf("waiting runtime's status %q does not give the quota's numbers", msg)
	}
	deployments, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: selector(waiting)})
	if err != nil || len(deployments.Items) != 0 {
		t.Errorf("the waiting runtime has deployments: %v, %d", err, len(deployments.Items))
	}
	if n := e.QueryInt(`SELECT coalesce(sum(slots), 0) FROM slot_reservations`); n != 3 {
		t.Errorf("%d slots reserved, want 3", n)
	}

	e.Berth("resource", "delete", ready)
	e.WaitReady(waiting, readyWithin)
	if n := e.QueryInt(`SELECT coalesce(sum(slots), 0) FROM slot_reservations`); n != 3 {
		t.Errorf("%d slots reserved after the swap, want 3", n)
	}
	e.Berth("resource", "delete", waiting)
	e.WaitCount("every runtime deprovisioned", readyWithin, 0, "SELECT count(*) FROM resources")
	if n := e.QueryInt(`SELECT count(*) FROM slot_reservations`); n != 0 {
		t.Errorf("%d reservations left after every runtime was deleted", n)
	}
	for _, a := range agents {
		a.Stop(t)
	}
}
