//go:build k8s

package k8s_test

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/berth-dev/berth/environ/kubernetes"
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
			case r.Status == "pending" && r.Reason == "WaitingForCapacity":
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

// holdingProxy is an HTTPS proxy to the API server, with the admin's credentials, that can
// hold one request: the first PATCH of a path ending in suffix after arm, until release.
type holdingProxy struct {
	kubeconfig string
	mu         sync.Mutex
	suffix     string
	held       chan struct{} // closed when the request is held
	release    chan struct{} // closed to let it through
}

func newHoldingProxy(t *testing.T) *holdingProxy {
	t.Helper()
	cfg := adminConfig(t)
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Authorization")
		p.mu.Lock()
		hold := p.suffix != "" && r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, p.suffix)
		var release chan struct{}
		if hold {
			p.suffix = ""
			close(p.held)
			release = p.release
		}
		p.mu.Unlock()
		if hold {
			<-release
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: proxy
  user:
    token: through-the-proxy
contexts:
- name: proxy
  context: {cluster: proxy, user: proxy}
current-context: proxy
`, srv.URL, base64.StdEncoding.EncodeToString(ca))
	if err := os.WriteFile(p.kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// arm holds the next PATCH of a path ending in suffix; it returns a channel closed once the
// request is held and a func that lets it through.
func (p *holdingProxy) arm(suffix string) (<-chan struct{}, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.suffix, p.held, p.release = suffix, make(chan struct{}), make(chan struct{})
	release := p.release
	var once sync.Once
	return p.held, func() { once.Do(func() { close(release) }) }
}

// TestStaleAgentRefused: an agent whose apply of a runtime's Deployment is in flight (held
// by a proxy in front of the API server) when it is stopped with SIGSTOP loses the runtime
// to another agent, which rolls out a newer generation (mid-rollout), or hibernates it
// (mid-hibernate: the stale write would wake it). After SIGCONT its apply reaches the API
// server: the live Deployment keeps the newer generation and lease (and zero replicas, its
// pods counted over many polls), and the stale agent logs its refused write.
func TestStaleAgentRefused(t *testing.T) {
	for _, hibernate := range []bool{false, true} {
		name := "mid-rollout"
		if hibernate {
			name = "mid-hibernate"
		}
		t.Run(name, func(t *testing.T) { staleAgentRefused(t, hibernate) })
	}
}

func staleAgentRefused(t *testing.T, hibernate bool) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	proxy := newHoldingProxy(t)
	spec := fmt.Sprintf(`{"host": "http://*.rt.test", "namespace": %q, "image": "rilldata/rill",
		"kubeconfig_path": %q, "timeout_seconds": 90, "data_dir": "/mnt/data"}`, ns, proxy.kubeconfig)
	e := e2etest.New(t, provisionerSet(spec))
	stale := startAgentAs(e, "agent-stale", failoverFlags...)
	waitAgentsLive(t, e, "agent-stale")
	id := e.Create("--type", "runtime", "--name", "contested", "--owner", "team-a", "--arg", "slots=1")
	e.WaitReady(id, readyWithin)
	d := deploymentOf(t, cs, ns, id)

	held, release := proxy.arm("/deployments/" + d.Name)
	t.Cleanup(release)
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET args = '{"slots": 2}' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(readyWithin):
		t.Fatal("the agent never applied the new generation's Deployment")
	}
	stale.Signal(t, syscall.SIGSTOP)
	stopped := true
	t.Cleanup(func() {
		if stopped {
			stale.Signal(t, syscall.SIGCONT)
		}
	})

	fresh := startAgentAs(e, "agent-fresh", failoverFlags...)
	want := `{"slots": 3}`
	if hibernate {
		if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET hibernate = true WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		e.WaitResource(id, "hibernated by the other agent", readyWithin, func(r e2etest.Resource) bool { return r.Status == "hibernated" })
	} else {
		if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET args = $2::jsonb WHERE id = $1`, id, want); err != nil {
			t.Fatal(err)
		}
		e.WaitResource(id, "generation 3 ready", readyWithin, func(r e2etest.Resource) bool {
			return r.Status == "ready" && e.QueryInt(`SELECT observed_generation FROM resources WHERE id = $1`, id) == 3
		})
	}
	before := deploymentOf(t, cs, ns, id)
	newer := before.Annotations[kubernetes.AnnotationLeaseToken]
	t.Logf("taken over: deployment at generation %s, lease %s of %s, replicas %d", before.Annotations[kubernetes.AnnotationGeneration],
		newer, before.Annotations[kubernetes.AnnotationLeaseHolder], *before.Spec.Replicas)

	stale.Signal(t, syscall.SIGCONT)
	stopped = false
	release()
	e.Eventually("the stale agent logs its refused write", readyWithin, func() (bool, string) {
		return strings.Contains(stale.Logs(), "refused a stale write to the cluster"), ""
	})
	t.Logf("refused: %s", grepLines(stale.Logs(), "refused a stale write"))
	// Poll a while: neither the stale write nor anything after it changes the Deployment,
	// and a hibernated runtime gets no pod.
	for range 40 {
		now := deploymentOf(t, cs, ns, id)
		if now.Annotations[kubernetes.AnnotationLeaseToken] != newer || now.Annotations[kubernetes.AnnotationGeneration] != before.Annotations[kubernetes.AnnotationGeneration] ||
			*now.Spec.Replicas != *before.Spec.Replicas || !equality.Semantic.DeepEqual(now.Spec.Template, before.Spec.Template) {
			t.Fatalf("the deployment changed after the stale agent resumed: annotations %v, replicas %d", now.Annotations, *now.Spec.Replicas)
		}
		if hibernate {
			if n := podsOf(t, cs, ns, id); n != 0 {
				t.Fatalf("%d pods of the hibernated runtime after the stale agent resumed", n)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	fresh.Stop(t)
	stale.Stop(t)
}

// TestHibernatedWorkloadKeptAsleep: a hibernated runtime's Deployment scaled up out of band
// (through the scale subresource, as kubectl scale does) is scaled back to zero by the
// agent's environ check, which logs who woke it; the row stays hibernated.
func TestHibernatedWorkloadKeptAsleep(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	e := e2etest.New(t, provisionerSet(kubeSpec(t, ns, 90, "")))
	a := startAgent(e)
	id := e.Create("--type", "runtime", "--name", "sleepy", "--owner", "team-a", "--arg", "slots=1")
	e.WaitReady(id, readyWithin)
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET hibernate = true WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	e.WaitResource(id, "hibernated", readyWithin, func(r e2etest.Resource) bool { return r.Status == "hibernated" })
	d := deploymentOf(t, cs, ns, id)
	// The deployment controller may still be writing the scale-down's status: an update
	// read before one of its writes is refused as a conflict, and is read and made again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := cs.AppsV1().Deployments(ns).GetScale(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = 2
		_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, d.Name, scale, metav1.UpdateOptions{FieldManager: "kubectl"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Eventually("the hibernated deployment scaled back to zero, with no pod", repairWithin, func() (bool, string) {
		now := deploymentOf(t, cs, ns, id)
		pods := podsOf(t, cs, ns, id)
		return *now.Spec.Replicas == 0 && pods == 0, fmt.Sprintf("replicas %d, %d pods", *now.Spec.Replicas, pods)
	})
	logged := grepLines(a.Logs(), "hibernated resource found running")
	if !strings.Contains(logged, `woken-by="kubectl (through scale)"`) {
		t.Errorf("the agent does not say who woke the runtime: %q", logged)
	}
	if r := e.Get(id); r.Status != "hibernated" {
		t.Errorf("after the scale-down: %s", r)
	}
	a.Stop(t)
}
