// Package metrics holds the agent's Prometheus collectors: how reconciles go, how deep the
// provisioner's queue is, how many resources are in each status, environ capacity and
// health checks, how many agents are live, and how often the dependency engine starts each
// worker. One *Metrics is made per agent; the workers record into it through small
// interfaces of their own, and the HTTP server serves it as a prometheus.Gatherer. It
// counts in domain's and environ's terms (statuses, resource types, capacity), so it sits
// above them and below the workers, beside watcher.
package metrics

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Unknown is the label value of a provisioner the current provisioner set does not name, or
// of a resource type Berth does not know. Provisioner names and types are read from rows that
// clients write; labelling with them as written would let any client add series without
// bound, so the workers label a provisioner only with a name of the set and Metrics labels a
// type only with one of the types it was made with (those the agent serves). (A provisioner the set itself names "unknown"
// shares these series.)
const Unknown = "unknown"

// resourcesTimeout bounds the database query a scrape of berth_resources makes, so that a
// slow database never stalls a scrape.
const resourcesTimeout = 5 * time.Second

// StatusCounter counts resources by status (the database is one).
type StatusCounter interface {
	CountResourcesByStatus(ctx context.Context) (map[domain.Status]int, error)
}

// Metrics is the agent's registry and every collector in it. Its methods are safe for
// concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	reconciles        *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	queueDepth        *prometheus.GaugeVec // by owner class; see fairness.go
	queueMu           sync.Mutex           // guards queueClasses and spareClasses
	queueClasses      map[string]bool      // the class labels queueDepth reports
	spareClasses      map[string]bool      // ObserveQueue's map for the next call's labels
	inFlight          prometheus.Gauge
	createToReady     *prometheus.HistogramVec
	capacityWarning   *prometheus.GaugeVec
	healthChecks      *prometheus.CounterVec
	environFailures   *prometheus.CounterVec
	workerStarts      *prometheus.CounterVec
	agentsLive        prometheus.Gauge
	agentLeader       prometheus.Gauge
	leaseTakeovers    *prometheus.CounterVec

	capacity  *capacityCollector
	resources *resourcesCollector
	budgets   *budgetMetrics
	breakers  *breakerMetrics
	types     []domain.ResourceType // labelled by name; others are Unknown
}

// New returns a Metrics whose registry also holds the Go runtime and process collectors. It
// labels a resource type by its name when it is one of types (the agent's served types,
// environ.Catalog.TypeNames), and any other as Unknown.
func New(types ...domain.ResourceType) *Metrics {
	m := &Metrics{
		types:    slices.Clone(types),
		registry: prometheus.NewRegistry(),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_reconcile_total",
			Help: "Reconcile attempts by provisioner, resource type and outcome (ready, retry, capacity, permanent, deleted, hibernated, stale, broker-unavailable).",
		}, []string{"provisioner", "type", "outcome"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_reconcile_duration_seconds",
			Help:    "How long reconcile attempts take, by provisioner and resource type.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"provisioner", "type"}),
		queueDepth: newQueueDepth(),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_provisioner_in_flight",
			Help: "Reconciles running now.",
		}),
		createToReady: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_create_to_ready_seconds",
			Help:    "Time from a resource's creation to its first ready, by provisioner and resource type.",
			Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"provisioner", "type"}),
		capacityWarning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_capacity_warning",
			Help: "1 while a provisioner's capacity warning of a kind is active, else 0.",
		}, []string{"provisioner", "kind"}),
		healthChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_health_checks_total",
			Help: "Resource health checks by provisioner and result: healthy, repaired (passed once the environ repaired the resource), unhealthy (failed), error (could not be made or recorded).",
		}, []string{"provisioner", "result"}),
		environFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_environ_check_failures_total",
			Help: "Failed checks of a provisioner's environ (its API or hosts unreachable).",
		}, []string{"provisioner"}),
		workerStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_engine_worker_starts_total",
			Help: "Starts of each of the agent's workers; more than one means restarts.",
		}, []string{"worker"}),
		agentsLive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_agents_live",
			Help: "Agents sharing the store whose last heartbeat is younger than --agent-ttl, as this agent last counted them.",
		}),
		agentLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_agent_leader",
			Help: "1 while this agent holds the leadership lease and runs what runs once (environ checks, capacity, pruning), 0 otherwise.",
		}),
		leaseTakeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_lease_takeovers_total",
			Help: "Claims by this agent of a resource lease whose previous holder was no longer live or whose lease had expired, by provisioner.",
		}, []string{"provisioner"}),
		capacity:  newCapacityCollector(),
		resources: newResourcesCollector(resourcesTimeout),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.reconciles, m.reconcileDuration, m.queueDepth, m.inFlight, m.createToReady,
		m.capacityWarning, m.healthChecks, m.environFailures, m.workerStarts, m.agentsLive, m.agentLeader, m.leaseTakeovers,
		m.capacity, m.resources,
	)
	m.budgets = newBudgetMetrics(m.registry)
	m.breakers = newBreakerMetrics(m.registry)
	return m
}

// Gather collects every metric; *Metrics is the prometheus.Gatherer the HTTP server serves.
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) {
	return m.registry.Gather()
}

// ObserveReconcile counts one reconcile attempt and how long it took. The provisioner
// worker names the outcomes: ready, retry, capacity, permanent, deleted, hibernated, stale or
// broker-unavailable.
func (m *Metrics) ObserveReconcile(provisioner string, t domain.ResourceType, outcome string, d time.Duration) {
	m.reconciles.WithLabelValues(provisioner, m.typeLabel(t), outcome).Inc()
	m.reconcileDuration.WithLabelValues(provisioner, m.typeLabel(t)).Observe(d.Seconds())
}

// ObserveCreateToReady records how long a resource took from creation to its first ready.
func (m *Metrics) ObserveCreateToReady(provisioner string, t domain.ResourceType, d time.Duration) {
	m.createToReady.WithLabelValues(provisioner, m.typeLabel(t)).Observe(d.Seconds())
}

// ObserveLeaseTakeover counts a claim that took a resource's lease over from a holder that
// was no longer live. The provisioner is a name of the provisioner set, or Unknown, as for
// ObserveReconcile; the holders are left out, so the series stay few.
func (m *Metrics) ObserveLeaseTakeover(provisioner string) {
	m.leaseTakeovers.WithLabelValues(provisioner).Inc()
}

// typeLabel is t when the agent serves the type, else Unknown.
func (m *Metrics) typeLabel(t domain.ResourceType) string {
	if slices.Contains(m.types, t) {
		return string(t)
	}
	return Unknown
}

// ObserveCapacity replaces what is known of provisioner's capacity: hosts absent from c
// are no longer reported.
func (m *Metrics) ObserveCapacity(provisioner string, c environ.Capacity) {
	m.capacity.set(provisioner, c)
}

// ForgetCapacity drops every capacity figure and warning state observed: the worker that
// sampled them stopped (its agent no longer leads), so they would only go stale while the
// leader exports the current ones.
func (m *Metrics) ForgetCapacity() {
	m.capacity.reset()
	m.capacityWarning.Reset()
}

// ObserveCapacityWarning records whether provisioner's capacity warning of kind is active.
func (m *Metrics) ObserveCapacityWarning(provisioner, kind string, active bool) {
	v := 0.0
	if active {
		v = 1
	}
	m.capacityWarning.WithLabelValues(provisioner, kind).Set(v)
}

// ObserveHealthCheck counts one resource health check. The health-check worker names the
// results: healthy, repaired, unhealthy or error.
func (m *Metrics) ObserveHealthCheck(provisioner, result string) {
	m.healthChecks.WithLabelValues(provisioner, result).Inc()
}

// ObserveEnvironCheck counts a failed check of provisioner's environ (err != nil); a passing
// one only makes the series appear, at its current count.
func (m *Metrics) ObserveEnvironCheck(provisioner string, err error) {
	c := m.environFailures.WithLabelValues(provisioner)
	if err != nil {
		c.Inc()
	}
}

// ObserveAgentsLive records how many agents are live; the membership worker counts them
// after each heartbeat.
func (m *Metrics) ObserveAgentsLive(n int) {
	m.agentsLive.Set(float64(n))
}

// ObserveLeader records whether this agent holds the leadership lease; the leadership worker
// sets it at each claim.
func (m *Metrics) ObserveLeader(leader bool) {
	v := 0.0
	if leader {
		v = 1
	}
	m.agentLeader.Set(v)
}

// RecordStart counts a start of the named worker; with it *Metrics is the dependency
// engine's Metrics.
func (m *Metrics) RecordStart(name string) {
	m.workerStarts.WithLabelValues(name).Inc()
}

// TrackResources makes berth_resources count counter's resources at every scrape until the
// returned untrack is called. Only the latest counter tracked is asked; while none is (the
// database is down), berth_resources is absent rather than stale.
func (m *Metrics) TrackResources(counter StatusCounter) (untrack func()) {
	token := m.resources.track(counter)
	return func() { m.resources.untrack(token) }
}

// capacityCollector reports the last capacity observed of each provisioner, as one
// consistent snapshot per scrape.
type capacityCollector struct {
	total, used *prometheus.Desc

	mu    sync.Mutex
	byEnv map[string]environ.Capacity
}

func newCapacityCollector() *capacityCollector {
	labels := []string{"provisioner", "host", "unit"}
	return &capacityCollector{
		total: prometheus.NewDesc("berth_capacity_total",
			"A provisioner's capacity on each host, in the provisioner's unit.", labels, nil),
		used: prometheus.NewDesc("berth_capacity_used",
			"A provisioner's capacity in use on each host, in the provisioner's unit.", labels, nil),
		byEnv: make(map[string]environ.Capacity),
	}
}

func (c *capacityCollector) set(provisioner string, capacity environ.Capacity) {
	capacity.Hosts = append([]environ.HostCapacity(nil), capacity.Hosts...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byEnv[provisioner] = capacity
}

func (c *capacityCollector) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byEnv = make(map[string]environ.Capacity)
}

func (c *capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.used
}

func (c *capacityCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for provisioner, capacity := range c.byEnv {
		hosts := capacity.Hosts
		if len(hosts) == 0 {
			// An environ that reports no hosts: its whole capacity under host "".
			hosts = []environ.HostCapacity{{Total: capacity.Total, Used: capacity.Used}}
		}
		for _, h := range hosts {
			ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(h.Total), provisioner, h.Host, capacity.Unit)
			ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(h.Used), provisioner, h.Host, capacity.Unit)
		}
	}
}

// resourcesCollector asks the tracked StatusCounter at scrape time, so the counts are never
// older than the scrape.
type resourcesCollector struct {
	desc    *prometheus.Desc
	timeout time.Duration

	mu      sync.Mutex
	counter StatusCounter
	token   int // identifies the latest track call
}

func newResourcesCollector(timeout time.Duration) *resourcesCollector {
	return &resourcesCollector{
		desc: prometheus.NewDesc("berth_resources",
			"Resources in each status, counted at scrape time.", []string{"status"}, nil),
		timeout: timeout,
	}
}

func (c *resourcesCollector) track(counter StatusCounter) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token++
	c.counter = counter
	return c.token
}

// untrack forgets the counter tracked by token, unless a later one replaced it.
func (c *resourcesCollector) untrack(token int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == token {
		c.counter = nil
	}
}

func (c *resourcesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *resourcesCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	counter := c.counter
	c.mu.Unlock()
	if counter == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := counter.CountResourcesByStatus(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("count resources by status: %w", err))
		return
	}
	// Every status is reported, so a status with no resources reads 0 rather than missing.
	for _, status := range domain.Statuses {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[status]), string(status))
	}
}
