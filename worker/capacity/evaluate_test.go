package capacity

import (
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
)

type evaluateSuite struct{}

var _ = gc.Suite(&evaluateSuite{})

func (*evaluateSuite) TestEvaluate(c *gc.C) {
	t := Thresholds{Total: 0.8, Host: 0.7}
	type host = environ.HostCapacity
	for _, tt := range []struct {
		about  string
		hosts  []host
		active []string
		msgs   map[string]string
	}{{
		about: "room everywhere",
		hosts: []host{{Host: "a", Total: 10, Used: 5}, {Host: "b", Total: 10, Used: 2}},
	}, {
		about:  "exactly 80% of the total, and every host past 70%",
		hosts:  []host{{Host: "a", Total: 10, Used: 8}, {Host: "b", Total: 10, Used: 8}},
		active: []string{WarningTotal, WarningHosts},
		msgs: map[string]string{
			WarningTotal: "80% of 20 slots used (threshold 80%; down hosts excluded)",
			WarningHosts: "every usable host is at least 80% full (threshold 70%; least full: a)",
		},
	}, {
		about:  "one host with room keeps the hosts warning off",
		hosts:  []host{{Host: "a", Total: 10, Used: 10}, {Host: "b", Total: 10, Used: 6}},
		active: []string{WarningTotal},
	}, {
		about:  "down and empty hosts are excluded, not counted as room",
		hosts:  []host{{Host: "a", Total: 10, Used: 8}, {Host: "b", Total: 10, Down: true}, {Host: "c"}, {Host: "old", Used: 3}},
		active: []string{WarningTotal, WarningHosts},
		msgs:   map[string]string{WarningTotal: "80% of 10 slots used (threshold 80%; down hosts excluded)"},
	}, {
		about:  "a down host's use is not counted either",
		hosts:  []host{{Host: "a", Total: 10, Used: 5}, {Host: "b", Total: 10, Used: 10, Down: true}},
		active: nil,
	}, {
		about:  "no usable host is a warning of its own",
		hosts:  []host{{Host: "a", Total: 10, Used: 10, Down: true}, {Host: "c"}},
		active: []string{WarningNoUsableHosts},
		msgs:   map[string]string{WarningNoUsableHosts: "no usable host: 1 down, 1 without capacity"},
	}} {
		c.Logf("%s", tt.about)
		got := evaluate(environ.Capacity{Unit: "slots", Hosts: tt.hosts}, t)
		var active []string
		for _, kind := range Kinds {
			if got[kind].active {
				active = append(active, kind)
			}
		}
		c.Check(active, gc.DeepEquals, tt.active)
		for kind, msg := range tt.msgs {
			c.Check(got[kind].message, gc.Equals, msg)
		}
	}
}

func (*evaluateSuite) TestEvaluateWithoutHosts(c *gc.C) {
	t := Thresholds{Total: 0.8, Host: 0.7}
	got := evaluate(environ.Capacity{Unit: "millicpu", Total: 1000, Used: 900}, t)
	c.Check(got[WarningTotal].active, gc.Equals, true)
	c.Check(got[WarningHosts].active, gc.Equals, true)
	got = evaluate(environ.Capacity{Unit: "millicpu"}, t)
	c.Check(got[WarningNoUsableHosts].active, gc.Equals, true)
	c.Check(got[WarningTotal].active, gc.Equals, false)
}
