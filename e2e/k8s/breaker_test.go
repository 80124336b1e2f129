//go:build k8s

package k8s_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// faultWindow is how long the fault proxy answers faultRate of the API requests with 429
// or 503.
const (
	faultWindow = 45 * time.Second
	faultRate   = 0.3
)

// TestBreakerKeepsOtherProvisionersGoingAndConverges puts a fault-injecting proxy in front
// of the API server of the kubernetes provisioner and runs a static provisioner in the
// same agent. During the fault the kubernetes provisioner's breaker opens (its row in
// broker_breakers, which every agent shares), the kubernetes runtimes wait with
// BrokerUnavailable, and the static runtimes created meanwhile become ready as if nothing
// happened. After the fault the breaker's probe closes it and every runtime converges to
// ready, none of them ever in error.
func TestBreakerKeepsOtherProvisionersGoingAndConverges(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	proxy := startFaultProxy(t)
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ping" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(host.Close)

	kube := fmt.Sprintf(`{"host": "http://*.rt.test", "namespace": %q, "image": "rilldata/rill",
		"kubeconfig_path": %q, "timeout_seconds": 30, "data_dir": "/mnt/data"}`, ns, proxy.Kubeconfig)
	e := e2etest.New(t, provisionerSet(kube))
	// The agent serves both provisioners, the kubernetes one by default; the environment's
	// check of the set (which knows no default) ran on the kubernetes one alone.
	set := fmt.Sprintf(`{
		%q: {"type": "kubernetes", "spec": %s,
		     "breaker": {"failures": 5, "window": "30s", "open_for": "5s", "max_open_for": "15s"}},
		"pool": {"type": "static", "spec": {"runtimes": [{"host": %q, "slots": 100, "data_dir": "/mnt/data"}]}}
	}`, provisioner, kube, host.URL)
	if err := os.WriteFile(e.SetPath, []byte(set), 0o600); err != nil {
		t.Fatal(err)
	}
	startAgent(e, "--default-provisioner", provisioner)

	// A calm start: one kubernetes runtime becomes ready through the proxy.
	first := e.Create("--type", "runtime", "--name", "calm", "--owner", "team-k", "--arg", "slots=1")
	e.WaitReady(first, readyWithin)

	proxy.setFault(faultRate)
	faultStart := time.Now()
	before, _, _ := proxy.counts()
	kubeIDs := []string{first}
	for i := range 12 {
		kubeIDs = append(kubeIDs, e.Create("--type", "runtime", "--name", fmt.Sprintf("k-%d", i), "--owner", "team-k", "--arg", "slots=1"))
	}
	e.Eventually("the kubernetes provisioner's breaker opens", faultWindow, func() (bool, string) {
		state := queryString(e, `SELECT coalesce((SELECT state || ' after ' || failures || ' failures, opened ' || open_count || ' times'
			FROM broker_breakers WHERE provisioner = $1), 'no breaker row')`, provisioner)
		return e.QueryInt(`SELECT count(*) FROM broker_breakers WHERE provisioner = $1 AND open_count > 0`, provisioner) == 1, state
	})
	opened := time.Since(faultStart)
	e.Eventually("a kubernetes runtime waits with BrokerUnavailable", faultWindow, func() (bool, string) {
		n := e.QueryInt(`SELECT count(*) FROM resources WHERE provisioner = $1 AND reason = 'BrokerUnavailable'`, provisioner)
		return n > 0, e.StatusCounts()
	})

	// The static provisioner goes on at full speed meanwhile.
	staticStart := time.Now()
	var staticIDs []string
	for i := range 10 {
		staticIDs = append(staticIDs, e.Create("--type", "runtime", "--name", fmt.Sprintf("s-%d", i), "--owner", "team-s", "--arg", "slots=1", "--provisioner", "pool"))
	}
	e.WaitCount("every static runtime ready during the fault", 30*time.Second, len(staticIDs),
		`SELECT count(*) FROM resources WHERE provisioner = 'pool' AND status = 'ready'`)
	staticReady := time.Since(staticStart)
	if rest := faultWindow - time.Since(faultStart); rest > 0 {
		time.Sleep(rest)
	} else {
		t.Errorf("the static runtimes were ready %s after the fault began, past its window of %s", time.Since(faultStart), faultWindow)
	}
	requests, throttled, unavailable := proxy.counts()
	proxy.setFault(0)
	t.Logf("fault of %s: breaker opened after %s; 10 static runtimes ready in %s; the proxy got %d API requests (%.1f/s), answered %d with 429 and %d with 503",
		faultWindow, opened.Round(100*time.Millisecond), staticReady.Round(10*time.Millisecond), requests-before,
		float64(requests-before)/faultWindow.Seconds(), throttled, unavailable)

	recovered := time.Now()
	e.WaitCount("every runtime ready after the fault", 2*time.Minute, len(kubeIDs)+len(staticIDs),
		`SELECT count(*) FROM resources WHERE status = 'ready' AND observed_generation = generation`)
	t.Logf("every runtime ready %s after the fault ended", time.Since(recovered).Round(100*time.Millisecond))
	if n := e.QueryInt(`SELECT count(*) FROM resource_events WHERE status = 'error'`); n != 0 {
		t.Errorf("%d resource events in status error; want none", n)
	}
	if state := queryString(e, `SELECT state FROM broker_breakers WHERE provisioner = $1`, provisioner); state != "closed" {
		t.Errorf("breaker after convergence: %s, want closed", state)
	}
	for _, id := range kubeIDs {
		if d := deploymentOf(t, cs, ns, id); !rolledOut(d) {
			t.Errorf("runtime %s ready but its deployment is not rolled out: %+v", id, d.Status)
		}
	}
}

// queryString runs a query answering one text.
func queryString(e *e2etest.Env, query string, args ...any) string {
	e.T.Helper()
	var s string
	if err := e.SQL.QueryRowContext(context.Background(), query, args...).Scan(&s); err != nil {
		e.T.Fatalf("%s: %v", query, err)
	}
	return s
}
