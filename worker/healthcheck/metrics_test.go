package healthcheck_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"time"

	"github.com/juju/worker/v4/workertest"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/metrics"
	"github.com/berth-dev/berth/worker/healthcheck"
)

// With five resources and a one-minute interval the checks are 12s apart (Rand 0 puts each
// at the start of its slot); every check is counted once, by what it found.
func (s *workerSuite) TestCountsEveryCheckByResult(c *gc.C) {
	for _, id := range []string{"r1", "r2", "r3", "r5"} {
		s.store.add(id)
	}
	s.store.addOn("r4", "gone") // its provisioner left the provisioner set
	s.env.errs["r2"] = errors.New("host a is down")
	s.env.result["r3"] = &environ.Resource{ID: "r3", State: map[string]any{"host": "a"}, Config: map[string]any{},
		Repairs: []string{"slot reservation was missing; reserved 1 slots on a again"}}
	s.env.errs["r5"] = errors.New("host a is down")
	s.store.recordErr = map[string]error{"r5": errors.New("connection reset")}
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	for k := 1; k <= 5; k++ {
		s.metrics.wait(c, "resource", k)
		if k < 5 {
			c.Assert(s.clock.WaitAdvance(12*time.Second, testkit.LongWait, 1), gc.IsNil)
		}
	}
	c.Check(s.metrics.wait(c, "resource", 5), gc.DeepEquals, []observation{
		{"resource", "pool", healthcheck.ResultError}, // r5: its failure could not be recorded
		{"resource", "pool", healthcheck.ResultHealthy},
		{"resource", "pool", healthcheck.ResultRepaired},
		{"resource", "pool", healthcheck.ResultUnhealthy},
		{"resource", metrics.Unknown, healthcheck.ResultError}, // r4: "gone" is not in the set
	})
}

func (s *workerSuite) TestACheckCutShortByKillIsNotCounted(c *gc.C) {
	s.store.add("r1")
	s.env.block = true
	w := s.start(c)
	s.env.calls.Next(c)
	workertest.CleanKill(c, w)
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	c.Check(s.metrics.seen, gc.HasLen, 0)
}

// teeMetrics records into the agent's real metrics and into a fake the test can wait on.
type teeMetrics struct {
	real *metrics.Metrics
	fake *fakeMetrics
}

func (t teeMetrics) ObserveHealthCheck(provisioner, result string) {
	t.real.ObserveHealthCheck(provisioner, result)
	t.fake.ObserveHealthCheck(provisioner, result)
}

// The worker's observations reach the agent's /metrics exposition as a scraper parses it.
func (s *workerSuite) TestResultsScrapedFromTheAgentsMetrics(c *gc.C) {
	s.store.add("r1")
	s.store.add("r2")
	s.env.errs["r2"] = errors.New("host a is down")
	m := metrics.New()
	s.config.Metrics = teeMetrics{real: m, fake: s.metrics}
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	s.metrics.wait(c, "resource", 1)
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	s.metrics.wait(c, "resource", 2)

	srv := httptest.NewServer(promhttp.HandlerFor(m, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	c.Assert(err, gc.IsNil)
	defer resp.Body.Close()
	c.Assert(resp.StatusCode, gc.Equals, http.StatusOK)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	c.Assert(err, gc.IsNil)

	series := func(name string) map[string]float64 {
		out := map[string]float64{}
		mf, ok := families[name]
		c.Assert(ok, gc.Equals, true, gc.Commentf("%s not exposed", name))
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			out[strings.Join(labels, ",")] = metric.GetCounter().GetValue()
		}
		return out
	}
	c.Check(series("berth_health_checks_total"), gc.DeepEquals, map[string]float64{
		"provisioner=pool,result=healthy":   1,
		"provisioner=pool,result=unhealthy": 1,
	})
}

// Rows naming 30 made-up provisioners, as any client can write them, are counted under
// unknown and add no other series.
func (s *workerSuite) TestMadeUpProvisionersAddNoSeries(c *gc.C) {
	s.store.add("r00")
	for i := 1; i <= 30; i++ {
		s.store.addOn(fmt.Sprintf("r%02d", i), fmt.Sprintf("made-up-%d", i))
	}
	m := metrics.New()
	s.config.Metrics = teeMetrics{real: m, fake: s.metrics}
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// r00 is checked at once; the others come due within the minute.
	s.metrics.wait(c, "resource", 1)
	c.Assert(s.clock.WaitAdvance(time.Minute-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	s.metrics.wait(c, "resource", 31)

	families, err := m.Gather()
	c.Assert(err, gc.IsNil)
	var series []string
	for _, mf := range families {
		if mf.GetName() != "berth_health_checks_total" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			series = append(series, fmt.Sprintf("%s %v", strings.Join(labels, ","), metric.GetCounter().GetValue()))
		}
	}
	sort.Strings(series)
	c.Check(series, gc.DeepEquals, []string{
		"provisioner=pool,result=healthy 1",
		"provisioner=unknown,result=error 30",
	})
}
