package metrics_test

import (
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/metrics"
)

// The queue depth is labelled by owner class; a class that has nothing queued any more
// leaves the series, and the default class is always there.
func TestQueueDepthByOwnerClass(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime)
	m.ObserveQueue(map[string]int{"": 4, "gold": 2}, 1)
	checkSeries(t, scrape(t, m), "berth_provisioner_queue_depth", map[string]float64{"class=default": 4, "class=gold": 2})

	m.ObserveQueue(map[string]int{"silver": 3}, 0)
	families := scrape(t, m)
	checkSeries(t, families, "berth_provisioner_queue_depth", map[string]float64{"class=default": 0, "class=silver": 3})
	checkSeries(t, families, "berth_provisioner_in_flight", map[string]float64{"": 0})
}
