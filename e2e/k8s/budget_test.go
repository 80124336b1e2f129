//go:build k8s

package k8s_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/berth-dev/berth/internal/e2etest"
)

// The shared budget of the test: three agents together make at most budgetRate requests a
// second, after a burst of budgetBurst.
const (
	budgetRate     = 20
	budgetBurst    = 40
	budgetAgents   = 3
	budgetWindow   = 60 * time.Second
	budgetRuntimes = 400 // about 12 requests each: 4,800 wanted, four times what the window allows
	// budgetChunk is what each agent may hold drawn and unspent when the window opens
	// (budget.ChunkSize of the budget): tokens taken from the bucket before the window
	// and spent in it.
	budgetChunk = 2
)

// TestBudgetSharedByThreeAgents: three agents sharing a provisioner with a budget of 20
// requests a second, given far more work than that allows, make no more requests in a
// minute than the budget lets through, as the API server counts them.
//
// The API server is shared (other tests, other users), so Berth's requests are told from
// the rest by who makes them: the agents use a service account of the test's own, and a
// FlowSchema of the test's own classifies exactly that account's requests, so the API
// server's apiserver_flowcontrol_dispatched_requests_total{flow_schema=...} counts every
// request of the agents and nothing else: creates, gets, lists, watches (each counted once,
// when it starts) and the retries client-go makes. Its apiserver_request_total, summed, is
// logged beside it: it counts every client's requests.
//
// The bound is budgetBurst + budgetRate * the window, plus what the agents may hold when it
// opens (budgetChunk each, see environ/internal/budget). The agents must also have used
// the budget (at least 80% of the rate): the work, not a lack of it, met the limit.
func TestBudgetSharedByThreeAgents(t *testing.T) {
	admin := clientset(t)
	ns := namespace(t, admin)
	kubeconfig, schema := budgetIdentity(t, admin, ns)
	spec := fmt.Sprintf(`{"host": "http://*.rt.test", "namespace": %q, "image": "rilldata/rill", "kubeconfig_path": %q,
		"timeout_seconds": 240, "data_dir": "/mnt/data", "budget": {"requests_per_second": %d, "burst": %d}}`,
		ns, kubeconfig, budgetRate, budgetBurst)
	e := e2etest.New(t, provisionerSet(spec))

	var names, addrs []string
	for i := range budgetAgents {
		name := fmt.Sprintf("budget-agent-%d", i+1)
		addr := freeAddr(t)
		startAgentAs(e, name, "--http-addr", addr)
		names, addrs = append(names, name), append(addrs, addr)
	}
	waitAgentsLive(t, e, names...)

	beforeAt := time.Now()
	before, beforeAll := dispatched(t, admin, schema), requestTotal(t, admin)
	samples := []countSample{{from: beforeAt, to: time.Now(), count: before}}
	drawsBefore := e.QueryInt(`SELECT COALESCE(sum(draws), 0) FROM broker_budgets`)
	start := time.Now()
	if _, err := e.SQL.ExecContext(context.Background(), `
		INSERT INTO resources (type, name, owner, args)
		SELECT 'runtime', 'budget-' || i, 'owner-' || (i % 3), '{"slots": 1}'::jsonb
		FROM generate_series(1, $1) AS i`, budgetRuntimes); err != nil {
		t.Fatal(err)
	}
	// The count is sampled every second over the window, so that the bound is checked on
	// every window between two samples, not only on the whole.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < budgetWindow {
		<-tick.C
		from := time.Now()
		n := dispatched(t, admin, schema)
		samples = append(samples, countSample{from: from, to: time.Now(), count: n})
	}
	afterAt := time.Now()
	after, afterAll := dispatched(t, admin, schema), requestTotal(t, admin)
	elapsed := time.Since(start)
	samples = append(samples, countSample{from: afterAt, to: time.Now(), count: after})
	worst := math.Inf(-1) // the most requests over the bound of a window: negative within it
	worstAt := ""
	for i := range samples {
		for j := i + 1; j < len(samples); j++ {
			// The counts were read somewhere between from and to: the window is at most
			// from the earlier's from to the later's to.
			window := samples[j].to.Sub(samples[i].from)
			over := samples[j].count - samples[i].count - (budgetBurst + budgetRate*window.Seconds() + budgetAgents*budgetChunk)
			if over > worst {
				worst, worstAt = over, fmt.Sprintf("%.0f requests in %v", samples[j].count-samples[i].count, window.Round(time.Millisecond))
			}
		}
	}
	if worst > 0 {
		t.Errorf("a window went past the budget: %s, %.0f over burst + rate*window + held", worstAt, worst)
	}
	drawsAfter := e.QueryInt(`SELECT sum(draws) FROM broker_budgets`)

	made := after - before
	bound := budgetBurst + budgetRate*elapsed.Seconds() + budgetAgents*budgetChunk
	ready := e.QueryInt(`SELECT count(*) FROM resources WHERE status = 'ready'`)
	var waited float64
	for _, addr := range addrs {
		waited += agentMetric(t, addr, "berth_broker_budget_wait_seconds_total")
	}
	t.Logf("closest window to the bound: %s, %.0f under it", worstAt, -worst)
	t.Logf("in %v the agents made %.0f requests (%.1f/s; bound %.0f = burst %d + %d/s * %.1fs + %d held), %d of %d runtimes ready; all clients: %.0f requests; %d draws from the budget (%.1f statements/s), calls waited %.0fs in all",
		elapsed.Round(time.Millisecond), made, made/elapsed.Seconds(), bound, budgetBurst, budgetRate, elapsed.Seconds(), budgetAgents*budgetChunk,
		ready, budgetRuntimes, afterAll-beforeAll, drawsAfter-drawsBefore, float64(drawsAfter-drawsBefore)/elapsed.Seconds(), waited)
	if made > bound {
		t.Errorf("the agents made %.0f requests in %v; the budget allows at most %.0f", made, elapsed, bound)
	}
	if made < 0.8*budgetRate*elapsed.Seconds() {
		t.Errorf("the agents made %.0f requests in %v, less than 80%% of the budget's %d/s: the test did not load it", made, elapsed, budgetRate)
	}
	if ready >= budgetRuntimes {
		t.Errorf("all %d runtimes ready within the window: the work did not want more than the budget", budgetRuntimes)
	}
	if waited <= 0 {
		t.Error("berth_broker_budget_wait_seconds_total is 0 on every agent: no call waited for a token")
	}
	if report := agentGet(t, addrs[0], "/debug/engine"); !strings.Contains(report, `"tokens-held"`) || !strings.Contains(report, `"requests-per-second"`) {
		t.Errorf("/debug/engine shows no budget:\n%s", report)
	}
}

// countSample is a count of requests read from the API server between from and to.
type countSample struct {
	from, to time.Time
	count    float64
}

// budgetIdentity makes the identity the agents use: a service account of ns allowed
// everything (the test is about counting, not permissions), a kubeconfig with its token,
// and a FlowSchema that classifies its requests and no one else's. It returns the
// kubeconfig's path and the FlowSchema's name, once the API server classifies by it.
func budgetIdentity(t *testing.T, admin kubernetes.Interface, ns string) (string, string) {
	t.Helper()
	ctx := context.Background()
	const account = "berth"
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	schema := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-high"},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ns, Name: account}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					ClusterScope: true, Namespaces: []string{"*"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
	if _, err := admin.FlowcontrolV1().FlowSchemas().Create(ctx, schema, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.FlowcontrolV1().FlowSchemas().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})

	expiry := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, account,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := adminConfig(t)
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kc.AuthInfos["berth"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["berth"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "berth", Namespace: ns}
	kc.CurrentContext = "berth"
	path := filepath.Join(t.TempDir(), "berth-budget.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	// The API server takes up a new FlowSchema within moments: until the account's requests
	// are counted under it, they would be missed.
	client := clientFor(t, path)
	e2etest.Eventually(t, "the account's requests classified by the test's FlowSchema", 30*time.Second, func() (bool, string) {
		if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		n := dispatched(t, admin, ns)
		return n > 0, fmt.Sprintf("%.0f dispatched", n)
	})
	return path, ns
}

// dispatched is how many requests the API server dispatched under FlowSchema schema, as its
// own metrics count them.
func dispatched(t *testing.T, admin kubernetes.Interface, schema string) float64 {
	t.Helper()
	return sumMetric(t, apiserverMetrics(t, admin), "apiserver_flowcontrol_dispatched_requests_total", `flow_schema="`+schema+`"`)
}

// requestTotal is the API server's apiserver_request_total summed over every series.
func requestTotal(t testing.TB, admin kubernetes.Interface) float64 {
	t.Helper()
	return sumMetric(t, apiserverMetrics(t, admin), "apiserver_request_total", "")
}

func apiserverMetrics(t testing.TB, admin kubernetes.Interface) string {
	t.Helper()
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("read the API server's metrics: %v", err)
	}
	return string(raw)
}

// sumMetric sums the samples of the metric name in a Prometheus text exposition whose
// labels contain match.
func sumMetric(t testing.TB, text, name, match string) float64 {
	t.Helper()
	sum := 0.0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if match != "" && !strings.Contains(line, match) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// freeAddr is a loopback address with a port free now, for an agent's HTTP server.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func agentGet(t *testing.T, addr, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s of agent at %s: %v", path, addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// agentMetric sums the samples of the metric name the agent at addr exports.
func agentMetric(t *testing.T, addr, name string) float64 {
	t.Helper()
	return sumMetric(t, agentGet(t, addr, "/metrics"), name, "")
}
