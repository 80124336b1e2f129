//go:build k8s

package k8s_test

import (
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// faultProxy is a reverse proxy to the test cluster's API server, which it reaches with the
// test kubeconfig's TLS and credentials. While a fault is on it answers a share of the
// requests itself, half with 429 Too Many Requests (Retry-After: 1, as the API server's
// priority and fairness does) and half with 503 Service Unavailable (no Retry-After, as a
// load balancer in front of a failing API server does), and passes the rest on.
type faultProxy struct {
	// Kubeconfig is a kubeconfig whose server is the proxy, with no credentials: the proxy
	// adds the cluster's.
	Kubeconfig string

	mu   sync.Mutex
	rate float64 // share of requests answered with a fault, 0 when off
	rand *rand.Rand

	requests, throttled, unavailable atomic.Int64
}

// startFaultProxy starts a proxy in front of the test cluster's API server, with no fault
// on; it stops when the test ends.
func startFaultProxy(t testing.TB) *faultProxy {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath(t))
	if err != nil {
		t.Fatalf("load BERTH_KUBECONFIG: %v", err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatalf("the API server's transport: %v", err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatalf("the API server's URL: %v", err)
	}
	p := &faultProxy{rand: rand.New(rand.NewPCG(1, 2))}
	upstream := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
		// A watch the agent ends is a cancelled request, which the proxy would log.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		switch p.fault() {
		case http.StatusTooManyRequests:
			p.throttled.Add(1)
			w.Header().Set("Retry-After", "1")
			writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", `, "details": {"retryAfterSeconds": 1}`)
		case http.StatusServiceUnavailable:
			p.unavailable.Add(1)
			writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "")
		default:
			upstream.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	p.Kubeconfig = filepath.Join(t.TempDir(), "proxy.kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q}}]
users: [{name: proxy, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
current-context: proxy
`, srv.URL)
	if err := os.WriteFile(p.Kubeconfig, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// setFault answers rate (0 to 1) of the requests from now on with a fault; 0 turns it off.
func (p *faultProxy) setFault(rate float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = rate
}

// fault is the status to answer a request with, or 0 to pass it on.
func (p *faultProxy) fault() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rate == 0 || p.rand.Float64() >= p.rate {
		return 0
	}
	if p.rand.IntN(2) == 0 {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// counts are the requests the proxy got and the faults it answered.
func (p *faultProxy) counts() (requests, throttled, unavailable int64) {
	return p.requests.Load(), p.throttled.Load(), p.unavailable.Load()
}

// writeStatus answers with a metav1.Status of code and reason, extra spliced into it.
func writeStatus(w http.ResponseWriter, code int, reason, extra string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "injected by the test's fault proxy", "reason": %q, "code": %d%s}`, reason, code, extra)
}
