package provisioner_test

import (
	"fmt"
	"sort"
	"strings"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/metrics"
)

// Rows naming 30 made-up provisioners, as any client can write them, add no series to the
// agent's metrics beyond those of unknown.
func (s *workerSuite) TestMadeUpProvisionersAddNoSeries(c *gc.C) {
	m := metrics.New(domain.ResourceTypeRuntime)
	cfg := s.config()
	cfg.Metrics = m
	s.state.add(domain.Resource{ID: "r00", Provisioner: "pool"})
	ids := []string{"r00"}
	for i := 1; i <= 30; i++ {
		id := fmt.Sprintf("r%02d", i)
		s.state.add(domain.Resource{ID: id, Provisioner: fmt.Sprintf("made-up-%d", i)})
		ids = append(ids, id)
	}
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, ids...)
	s.state.waitRow(c, "r00", "ready", ready(1))
	for _, id := range ids[1:] {
		s.state.waitRow(c, id, "error", func(r *domain.Resource) bool { return r.Status == domain.StatusError })
	}
	s.state.waitIdle(c, "r30", 1)

	families, err := m.Gather()
	c.Assert(err, gc.IsNil)
	series := map[string][]string{}
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), "berth_") {
			continue
		}
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			series[mf.GetName()] = append(series[mf.GetName()], strings.Join(labels, ","))
		}
	}
	for name := range series {
		sort.Strings(series[name])
	}
	c.Check(series["berth_reconcile_total"], gc.DeepEquals, []string{
		"outcome=permanent,provisioner=unknown,type=runtime",
		"outcome=ready,provisioner=pool,type=runtime",
	})
	c.Check(series["berth_reconcile_duration_seconds"], gc.DeepEquals, []string{
		"provisioner=pool,type=runtime",
		"provisioner=unknown,type=runtime",
	})
	c.Check(series["berth_create_to_ready_seconds"], gc.DeepEquals, []string{"provisioner=pool,type=runtime"})
}
