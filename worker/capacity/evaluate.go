package capacity

import (
	"fmt"
	"math"

	"github.com/berth-dev/berth/environ"
)

// Warning kinds, as stored and shown.
const (
	WarningTotal         = "total"
	WarningHosts         = "hosts"
	WarningNoUsableHosts = "no-usable-hosts"
)

// Kinds lists every warning kind, in the order they are evaluated.
var Kinds = []string{WarningTotal, WarningHosts, WarningNoUsableHosts}

// warning is one kind's evaluated state.
type warning struct {
	active  bool
	message string
}

// Thresholds are the fractions of capacity in use that raise a warning.
type Thresholds struct {
	Total float64 // of the usable capacity of the provisioner
	Host  float64 // of every usable host
}

// evaluate returns the state of every warning kind for c.
func evaluate(c environ.Capacity, t Thresholds) map[string]warning {
	hosts := c.Hosts
	if len(hosts) == 0 {
		hosts = []environ.HostCapacity{{Total: c.Total, Used: c.Used}}
	}
	var (
		total, used   int64
		usable        int
		down, empty   int
		leastFull     = math.Inf(1)
		leastFullHost string
	)
	for _, h := range hosts {
		switch {
		case h.Down:
			down++
			continue
		case h.Total <= 0:
			empty++
			continue
		}
		usable++
		total += h.Total
		used += h.Used
		if f := fraction(h.Used, h.Total); f < leastFull {
			leastFull, leastFullHost = f, h.Host
		}
	}
	out := map[string]warning{
		WarningTotal:         {},
		WarningHosts:         {},
		WarningNoUsableHosts: {},
	}
	if usable == 0 {
		out[WarningNoUsableHosts] = warning{true, fmt.Sprintf("no usable host: %d down, %d without capacity", down, empty)}
		return out
	}
	unit := c.Unit
	if f := fraction(used, total); atLeast(f, t.Total) {
		out[WarningTotal] = warning{true, fmt.Sprintf("%s of %d %s used (threshold %s; down hosts excluded)", percent(f), total, unit, percent(t.Total))}
	}
	if atLeast(leastFull, t.Host) {
		name := leastFullHost
		if name == "" {
			name = "the provisioner"
		}
		out[WarningHosts] = warning{true, fmt.Sprintf("every usable host is at least %s full (threshold %s; least full: %s)",
			percent(leastFull), percent(t.Host), name)}
	}
	return out
}

func fraction(used, total int64) float64 { return float64(used) / float64(total) }

// atLeast compares fractions with a little slack, so 8 of 10 is 80%.
func atLeast(f, threshold float64) bool { return f >= threshold-1e-9 }

func percent(f float64) string { return fmt.Sprintf("%.0f%%", math.Floor(f*100+1e-9)) }
