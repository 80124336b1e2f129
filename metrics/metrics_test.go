package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/worker/v4/dependency"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/metrics"
	"github.com/berth-dev/berth/worker/healthcheck"
	"github.com/berth-dev/berth/worker/provisioner"
)

// *Metrics is what the agent hands the engine, the provisioner, the health checker and the
// HTTP server.
var (
	_ dependency.Metrics  = (*metrics.Metrics)(nil)
	_ provisioner.Metrics = (*metrics.Metrics)(nil)
	_ healthcheck.Metrics = (*metrics.Metrics)(nil)
	_ prometheus.Gatherer = (*metrics.Metrics)(nil)
)

// fakeCounter is a StatusCounter answering counts or err, remembering the deadline it was
// given.
type fakeCounter struct {
	counts map[domain.Status]int
	err    error

	mu       sync.Mutex
	deadline time.Time
	calls    int
}

func (f *fakeCounter) CountResourcesByStatus(ctx context.Context) (map[domain.Status]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.deadline, _ = ctx.Deadline()
	return f.counts, f.err
}

// scrape fetches /metrics through the Prometheus HTTP handler, as a scraper would, and
// parses the text exposition.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(m, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("scrape: content type %q, want the text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: unparseable exposition: %v", err)
	}
	return families
}

// series maps each sample of a family to its value, keyed by its labels as "k=v,k=v"
// (sorted). Histograms give their sample count.
func series(t *testing.T, families map[string]*dto.MetricFamily, name string) map[string]float64 {
	t.Helper()
	mf, ok := families[name]
	if !ok {
		t.Fatalf("metric %s not exposed", name)
	}
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(labels)
		var v float64
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v = float64(m.GetHistogram().GetSampleCount())
		default:
			t.Fatalf("metric %s has unexpected type %s", name, mf.GetType())
		}
		out[strings.Join(labels, ",")] = v
	}
	return out
}

func checkSeries(t *testing.T, families map[string]*dto.MetricFamily, name string, want map[string]float64) {
	t.Helper()
	got := series(t, families, name)
	if len(got) != len(want) {
		t.Errorf("%s: got %v, want %v", name, got, want)
		return
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s{%s}: got %v (present %v), want %v", name, k, g, ok, v)
		}
	}
}

func histogram(t *testing.T, families map[string]*dto.MetricFamily, name, labels string) *dto.Histogram {
	t.Helper()
	for _, m := range families[name].GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(ls)
		if strings.Join(ls, ",") == labels {
			return m.GetHistogram()
		}
	}
	t.Fatalf("%s{%s} not exposed", name, labels)
	return nil
}

func TestEveryMetricThroughTheHandler(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse)
	rt := domain.ResourceTypeRuntime

	m.ObserveReconcile("pool", rt, "ready", 2*time.Second)
	m.ObserveReconcile("pool", rt, "ready", 4*time.Second)
	m.ObserveReconcile("pool", rt, "retry", time.Second)
	m.ObserveReconcile("k8s", domain.ResourceTypeClickHouse, "capacity", time.Second)
	for _, o := range []string{"permanent", "deleted", "stale"} {
		m.ObserveReconcile("pool", rt, o, time.Millisecond)
	}
	m.ObserveQueue(map[string]int{"": 7}, 3)
	m.ObserveCreateToReady("pool", rt, 90*time.Second)
	m.ObserveCapacity("pool", environ.Capacity{Unit: "slots", Total: 12, Used: 5, Hosts: []environ.HostCapacity{
		{Host: "http://a:8080", Total: 8, Used: 5},
		{Host: "http://b:8080", Total: 4, Used: 0, Down: true},
	}})
	m.ObserveCapacity("k8s", environ.Capacity{Unit: "millicpu", Total: 4000, Used: 1500})
	m.ObserveCapacityWarning("pool", "low", true)
	m.ObserveCapacityWarning("pool", "host-down", false)
	m.ObserveHealthCheck("pool", healthcheck.ResultHealthy)
	m.ObserveHealthCheck("pool", healthcheck.ResultHealthy)
	m.ObserveHealthCheck("pool", healthcheck.ResultUnhealthy)
	m.ObserveHealthCheck("pool", healthcheck.ResultRepaired)
	m.ObserveHealthCheck("k8s", healthcheck.ResultError)
	m.ObserveEnvironCheck("pool", errors.New("host unreachable"))
	m.ObserveEnvironCheck("pool", errors.New("host unreachable"))
	m.ObserveEnvironCheck("k8s", nil)
	m.ObserveAgentsLive(3)
	m.ObserveLeader(true)
	m.ObserveLeaseTakeover("pool")
	m.ObserveLeaseTakeover("pool")
	m.ObserveLeaseTakeover(metrics.Unknown)
	m.RecordStart("database")
	m.RecordStart("database")
	m.RecordStart("provisioner")
	counter := &fakeCounter{counts: map[domain.Status]int{domain.StatusReady: 4, domain.StatusPending: 2}}
	untrack := m.TrackResources(counter)
	defer untrack()

	families := scrape(t, m)

	checkSeries(t, families, "berth_reconcile_total", map[string]float64{
		"outcome=ready,provisioner=pool,type=runtime":      2,
		"outcome=retry,provisioner=pool,type=runtime":      1,
		"outcome=capacity,provisioner=k8s,type=clickhouse": 1,
		"outcome=permanent,provisioner=pool,type=runtime":  1,
		"outcome=deleted,provisioner=pool,type=runtime":    1,
		"outcome=stale,provisioner=pool,type=runtime":      1,
	})
	checkSeries(t, families, "berth_reconcile_duration_seconds", map[string]float64{
		"provisioner=pool,type=runtime":   6,
		"provisioner=k8s,type=clickhouse": 1,
	})
	h := histogram(t, families, "berth_reconcile_duration_seconds", "provisioner=pool,type=runtime")
	if got, want := h.GetSampleSum(), 7.003; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("reconcile duration sum = %v, want %v", got, want)
	}
	checkSeries(t, families, "berth_provisioner_queue_depth", map[string]float64{"class=default": 7})
	checkSeries(t, families, "berth_provisioner_in_flight", map[string]float64{"": 3})
	checkSeries(t, families, "berth_create_to_ready_seconds", map[string]float64{"provisioner=pool,type=runtime": 1})
	if sum := histogram(t, families, "berth_create_to_ready_seconds", "provisioner=pool,type=runtime").GetSampleSum(); sum != 90 {
		t.Errorf("create to ready sum = %v, want 90", sum)
	}
	checkSeries(t, families, "berth_capacity_total", map[string]float64{
		"host=http://a:8080,provisioner=pool,unit=slots": 8,
		"host=http://b:8080,provisioner=pool,unit=slots": 4,
		"host=,provisioner=k8s,unit=millicpu":            4000,
	})
	checkSeries(t, families, "berth_capacity_used", map[string]float64{
		"host=http://a:8080,provisioner=pool,unit=slots": 5,
		"host=http://b:8080,provisioner=pool,unit=slots": 0,
		"host=,provisioner=k8s,unit=millicpu":            1500,
	})
	checkSeries(t, families, "berth_capacity_warning", map[string]float64{
		"kind=low,provisioner=pool":       1,
		"kind=host-down,provisioner=pool": 0,
	})
	checkSeries(t, families, "berth_health_checks_total", map[string]float64{
		"provisioner=pool,result=healthy":   2,
		"provisioner=pool,result=unhealthy": 1,
		"provisioner=pool,result=repaired":  1,
		"provisioner=k8s,result=error":      1,
	})
	checkSeries(t, families, "berth_environ_check_failures_total", map[string]float64{
		"provisioner=pool": 2,
		"provisioner=k8s":  0,
	})
	checkSeries(t, families, "berth_agents_live", map[string]float64{"": 3})
	checkSeries(t, families, "berth_agent_leader", map[string]float64{"": 1})
	checkSeries(t, families, "berth_lease_takeovers_total", map[string]float64{
		"provisioner=pool":    2,
		"provisioner=unknown": 1,
	})
	checkSeries(t, families, "berth_engine_worker_starts_total", map[string]float64{
		"worker=database":    2,
		"worker=provisioner": 1,
	})
	checkSeries(t, families, "berth_resources", map[string]float64{
		"status=pending":      2,
		"status=provisioning": 0,
		"status=ready":        4,
		"status=unhealthy":    0,
		"status=error":        0,
		"status=deleting":     0,
		"status=hibernating":  0,
		"status=hibernated":   0,
	})
	// The Go runtime and process collectors are registered too.
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := families[name]; !ok {
			t.Errorf("%s not exposed", name)
		}
	}
}

func TestCapacityObservationReplacesTheLastOne(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse)
	m.ObserveCapacity("pool", environ.Capacity{Unit: "slots", Hosts: []environ.HostCapacity{
		{Host: "a", Total: 8, Used: 1}, {Host: "b", Total: 4, Used: 2},
	}})
	m.ObserveCapacity("pool", environ.Capacity{Unit: "slots", Hosts: []environ.HostCapacity{
		{Host: "a", Total: 8, Used: 3},
	}})
	checkSeries(t, scrape(t, m), "berth_capacity_used", map[string]float64{
		"host=a,provisioner=pool,unit=slots": 3, // b left the pool: no stale series
	})
}

func TestResourcesCountedAtScrapeTimeWithATimeout(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse)
	counter := &fakeCounter{counts: map[domain.Status]int{domain.StatusReady: 1}}
	untrack := m.TrackResources(counter)

	before := time.Now()
	checkSeries(t, scrape(t, m), "berth_resources", map[string]float64{
		"status=pending": 0, "status=provisioning": 0, "status=ready": 1,
		"status=unhealthy": 0, "status=error": 0, "status=deleting": 0,
		"status=hibernating": 0, "status=hibernated": 0,
	})
	counter.mu.Lock()
	counter.counts = map[domain.Status]int{domain.StatusReady: 2}
	deadline := counter.deadline
	counter.mu.Unlock()
	if deadline.IsZero() || deadline.Sub(before) > 5*time.Second+time.Second {
		t.Errorf("count query deadline %v after the scrape began; want a short bound", deadline.Sub(before))
	}
	if got := series(t, scrape(t, m), "berth_resources")["status=ready"]; got != 2 {
		t.Errorf("second scrape: ready = %v, want 2 (counted afresh)", got)
	}

	// Once untracked (the database went away), the series are gone, not stale.
	untrack()
	if _, ok := scrape(t, m)["berth_resources"]; ok {
		t.Error("berth_resources still exposed after its source stopped")
	}
}

func TestLaterTrackerWinsOverAnEarlierOneStopping(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse)
	untrackOld := m.TrackResources(&fakeCounter{counts: map[domain.Status]int{domain.StatusReady: 1}})
	untrackCurrent := m.TrackResources(&fakeCounter{counts: map[domain.Status]int{domain.StatusReady: 9}})
	defer untrackCurrent()
	untrackOld()
	if got := series(t, scrape(t, m), "berth_resources")["status=ready"]; got != 9 {
		t.Errorf("ready = %v, want 9 from the current tracker", got)
	}
}

func TestResourcesCountFailureKeepsTheOtherMetrics(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse)
	m.ObserveQueue(map[string]int{"": 1}, 0)
	untrack := m.TrackResources(&fakeCounter{err: errors.New("connection refused")})
	defer untrack()

	families := scrape(t, m)
	if _, ok := families["berth_resources"]; ok {
		t.Error("berth_resources exposed although counting failed")
	}
	checkSeries(t, families, "berth_provisioner_queue_depth", map[string]float64{"class=default": 1})
}

func TestGatherReportsACountFailure(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse)
	untrack := m.TrackResources(&fakeCounter{err: errors.New("connection refused")})
	defer untrack()
	_, err := m.Gather()
	if err == nil || !strings.Contains(err.Error(), "count resources by status: connection refused") {
		t.Errorf("Gather error = %v, want the count failure", err)
	}
}

// Types Berth does not know (rows written around the schema, or no row read at all) share
// one series: what clients write cannot add series.
func TestUnknownTypesShareOneSeries(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse)
	for i := range 30 {
		made := domain.ResourceType(fmt.Sprintf("made-up-%d", i))
		m.ObserveReconcile("pool", made, "permanent", time.Second)
		m.ObserveCreateToReady("pool", made, time.Second)
	}
	m.ObserveReconcile(metrics.Unknown, "", "retry", time.Second)
	m.ObserveReconcile("pool", domain.ResourceTypeRuntime, "ready", time.Second)

	families := scrape(t, m)
	checkSeries(t, families, "berth_reconcile_total", map[string]float64{
		"outcome=permanent,provisioner=pool,type=unknown": 30,
		"outcome=retry,provisioner=unknown,type=unknown":  1,
		"outcome=ready,provisioner=pool,type=runtime":     1,
	})
	checkSeries(t, families, "berth_reconcile_duration_seconds", map[string]float64{
		"provisioner=pool,type=unknown":    30,
		"provisioner=unknown,type=unknown": 1,
		"provisioner=pool,type=runtime":    1,
	})
	checkSeries(t, families, "berth_create_to_ready_seconds", map[string]float64{"provisioner=pool,type=unknown": 30})
}

func TestForgetCapacityDropsItsSeries(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse)
	m.ObserveCapacity("pool", environ.Capacity{Unit: "slots", Total: 12, Used: 5})
	m.ObserveCapacityWarning("pool", "total", true)
	m.ObserveHealthCheck("pool", healthcheck.ResultHealthy)
	m.ForgetCapacity()
	families := scrape(t, m)
	for _, name := range []string{"berth_capacity_total", "berth_capacity_used", "berth_capacity_warning"} {
		if f, ok := families[name]; ok && len(f.GetMetric()) > 0 {
			t.Errorf("%s still has %d series after ForgetCapacity", name, len(f.GetMetric()))
		}
	}
	checkSeries(t, families, "berth_health_checks_total", map[string]float64{"provisioner=pool,result=healthy": 1})
}
