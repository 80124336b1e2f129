package metrics

import "github.com/prometheus/client_golang/prometheus"

// DefaultOwnerClass is the label of the owners whose policy sets no class (or who have no
// policy).
const DefaultOwnerClass = "default"

// newQueueDepth makes the provisioner's queue depth by owner class. Owners are not labels
// (their number is unbounded); each owner is counted under the class its policy names, or
// under the owner itself when the operator allows owner labels (--metrics-owner-labels).
func newQueueDepth() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "berth_provisioner_queue_depth",
		Help: "Resources queued for a reconcile that has not started yet, by owner class (the class of the owner's policy; \"default\" for none).",
	}, []string{"class"})
}

// ObserveQueue records the provisioner's queue depth by owner class ("" is the default
// class), and the reconciles in flight. A class not in depthByClass has none queued; the
// default class is always reported.
func (m *Metrics) ObserveQueue(depthByClass map[string]int, inFlight int) {
	m.queueMu.Lock()
	defer m.queueMu.Unlock()
	// The classes seen last time become this time's spare map: the worker observes after
	// every outcome, thousands of times a second under a burst.
	seen := m.spareClasses
	if seen == nil {
		seen = make(map[string]bool, len(depthByClass)+1)
	}
	clear(seen)
	for class, depth := range depthByClass {
		label := classLabel(class)
		seen[label] = true
		m.queueDepth.WithLabelValues(label).Set(float64(depth))
	}
	if !seen[DefaultOwnerClass] {
		m.queueDepth.WithLabelValues(DefaultOwnerClass).Set(0)
		seen[DefaultOwnerClass] = true
	}
	for label := range m.queueClasses {
		if !seen[label] {
			m.queueDepth.DeleteLabelValues(label)
		}
	}
	m.queueClasses, m.spareClasses = seen, m.queueClasses
	m.inFlight.Set(float64(inFlight))
}

func classLabel(class string) string {
	if class == "" {
		return DefaultOwnerClass
	}
	return class
}
