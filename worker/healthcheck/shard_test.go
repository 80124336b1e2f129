package healthcheck_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/rendezvous"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/healthcheck"
)

// sharesOf are the ids by their rendezvous owner among agents, each sorted.
func sharesOf(agents, ids []string) map[string][]string {
	out := map[string][]string{}
	for _, id := range ids {
		owner := rendezvous.Owner(agents, id)
		out[owner] = append(out[owner], id)
	}
	for _, share := range out {
		slices.Sort(share)
	}
	return out
}

// addResources adds n ready resources r00, r01, ... and returns their ids.
func (s *workerSuite) addResources(n int) []string {
	var all []string
	for i := range n {
		id := fmt.Sprintf("r%02d", i)
		s.store.add(id)
		all = append(all, id)
	}
	return all
}

// peer is one agent's health checker over the suite's store and agents, with a clock and
// an environ of its own.
type peer struct {
	clock *testclock.Clock
	env   *recordingEnviron
	w     *healthcheck.Worker
}

func (s *workerSuite) startPeer(c *gc.C, id string) peer {
	clk := testclock.NewClock(s.t0)
	env := newRecordingEnviron(clk)
	config := s.config
	config.Clock, config.Agent.ID = clk, id
	config.Environs = &fakeEnvirons{envs: map[string]environ.Environ{"pool": env}}
	config.Metrics = newFakeMetrics()
	config.Locks = new(resourcelock.Set)
	w, err := healthcheck.NewWorker(config)
	c.Assert(err, gc.IsNil)
	return peer{clock: clk, env: env, w: w.(*healthcheck.Worker)}
}

// Two and three agents split the resources: each agent's first round checks its share and
// nothing else, the shares cover every resource, and no resource is in two.
func (s *workerSuite) TestAgentsSplitTheResourcesWithNoOverlapAndNoGap(c *gc.C) {
	all := s.addResources(30)
	for _, agents := range [][]string{{"agent-a", "agent-b"}, {"agent-a", "agent-b", "agent-c"}} {
		s.agents.setLive(agents...)
		want := sharesOf(agents, all)
		var union []string
		for _, id := range agents {
			p := s.startPeer(c, id)
			// Every check of the round is due within its interval.
			c.Assert(p.clock.WaitAdvance(time.Minute-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
			waitReport(c, p.w, map[string]any{"round-agents": len(agents), "round-share": len(want[id]), "round-checked": len(want[id])})
			workertest.CleanKill(c, p.w)
			got := ids(p.env.checked(0))
			c.Check(got, gc.DeepEquals, want[id], gc.Commentf("%s of %v", id, agents))
			c.Check(got, gc.Not(gc.HasLen), 0, gc.Commentf("%s of %v checked nothing", id, agents))
			union = append(union, got...)
		}
		slices.Sort(union)
		c.Check(union, gc.DeepEquals, all, gc.Commentf("the shares of %v", agents))
	}
}

// A round keeps the agents it started with when they change meanwhile; the next round
// shares the resources among the new set, and only the share of the agent that left or
// joined moves: when one leaves this agent keeps its share and takes some of the leaver's,
// when one joins this agent only gives some of its share to the newcomer.
func (s *workerSuite) TestAChangeOfAgentsMovesOnlyTheShareOfTheOneThatLeftOrJoined(c *gc.C) {
	all := s.addResources(60)
	env := newRecordingEnviron(s.clock)
	s.environs.envs["pool"] = env
	logs := newLogCapture()
	s.config.Logger = slog.New(logs)
	three := []string{"agent-a", "agent-b", "agent-c"}
	s.agents.setLive(three...)
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// agent-c leaves during the first round, which keeps its three agents.
	s.metrics.wait(c, "resource", 1)
	s.agents.setLive("agent-a", "agent-b")
	round1 := s.runRound(c, w, env, 1, 3)
	c.Check(round1, gc.DeepEquals, sharesOf(three, all)["agent-a"])

	round2 := s.runRound(c, w, env, 2, 2)
	c.Check(round2, gc.DeepEquals, sharesOf([]string{"agent-a", "agent-b"}, all)["agent-a"])
	for _, id := range round1 {
		c.Check(slices.Contains(round2, id), gc.Equals, true, gc.Commentf("agent-c left and agent-a lost %s", id))
	}
	for _, id := range round2 {
		if owner := rendezvous.Owner(three, id); !slices.Contains(round1, id) && owner != "agent-c" {
			c.Errorf("agent-c left and agent-a took %s from %s", id, owner)
		}
	}
	c.Check(len(round2) > len(round1), gc.Equals, true, gc.Commentf("agent-a took none of agent-c's share"))

	// agent-d joins.
	four := []string{"agent-a", "agent-b", "agent-c", "agent-d"}
	s.agents.setLive(four...)
	round3 := s.runRound(c, w, env, 3, 4)
	c.Check(round3, gc.DeepEquals, sharesOf(four, all)["agent-a"])
	for _, id := range round3 {
		c.Check(slices.Contains(round2, id), gc.Equals, true, gc.Commentf("agents joined and agent-a took %s", id))
	}
	for _, id := range round2 {
		if owner := rendezvous.Owner(four, id); !slices.Contains(round3, id) && owner != "agent-c" && owner != "agent-d" {
			c.Errorf("agents joined and agent-a gave %s to %s", id, owner)
		}
	}
	logs.waitCount(c, "health checks are now shared among these agents", 2)
}

// runRound lets round seq, shared among agents agents, run to the end of its interval and
// returns the ids it checked, sorted. The round starts now (the end of the one before) and
// its first check is due at once.
func (s *workerSuite) runRound(c *gc.C, w worker.Worker, env *recordingEnviron, seq, agents int) []string {
	from := s.t0.Add(time.Duration(seq-1) * time.Minute)
	if seq > 1 {
		c.Assert(s.clock.WaitAdvance(time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	}
	waitReport(c, w.(reporter), map[string]any{"round-seq": seq, "round-agents": agents})
	c.Assert(s.clock.WaitAdvance(from.Add(time.Minute-time.Nanosecond).Sub(s.clock.Now()), testkit.LongWait, 1), gc.IsNil)
	report := waitReportFunc(c, w, fmt.Sprintf("round %d's share checked", seq), func(r map[string]any) bool {
		return r["round-seq"] == seq && r["round-share"] == r["round-checked"] && r["round-share"] != 0 &&
			len(callsOf(env, from)) == r["round-checked"]
	})
	got := callsOf(env, from)
	c.Check(got, gc.HasLen, report["round-share"])
	return got
}

// callsOf are the ids env checked in the round that started at from, sorted.
func callsOf(env *recordingEnviron, from time.Time) []string {
	var in []call
	for _, call := range env.checked(0) {
		if !call.at.Before(from) && call.at.Before(from.Add(time.Minute)) {
			in = append(in, call)
		}
	}
	return ids(in)
}

// A round's checks are paced over its own share: with two agents and two of four resources
// in this agent's share, each check has half the interval.
func (s *workerSuite) TestPacesChecksOverItsOwnShare(c *gc.C) {
	agents := []string{"agent-a", "agent-b"}
	s.agents.setLive(agents...)
	all := s.addResources(30)
	mine := sharesOf(agents, all)["agent-a"][:2]
	theirs := sharesOf(agents, all)["agent-b"][:2]
	for _, id := range all {
		if !slices.Contains(mine, id) && !slices.Contains(theirs, id) {
			s.store.mu.Lock()
			delete(s.store.rows, id)
			s.store.mu.Unlock()
		}
	}
	s.env.block = true
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(s.env.calls.Next(c), gc.Equals, call{id: mine[0], at: s.t0})
	// The loop's timer and the first check's timeout.
	c.Assert(s.clock.WaitAdvance(29*time.Second, testkit.LongWait, 2), gc.IsNil)
	s.env.calls.None(c, shortWait)
	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 2), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: mine[1], at: s.t0.Add(30 * time.Second)})
	waitReport(c, w.(reporter), map[string]any{"round-agents": 2, "round-resources": 2})
	s.env.gate.Release()
	s.env.gate.Release()
}

// This agent shares the resources with the live agents on the listing's ttl, and counts
// itself among them while its own row is not listed live yet (it has just started), so
// that its share is checked.
func (s *workerSuite) TestCountsItselfAmongTheAgentsWhenNotListed(c *gc.C) {
	all := s.addResources(20)
	s.agents.setLive("agent-b")
	env := newRecordingEnviron(s.clock)
	s.environs.envs["pool"] = env
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Assert(s.clock.WaitAdvance(time.Minute-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	want := sharesOf([]string{"agent-a", "agent-b"}, all)["agent-a"]
	waitReport(c, w.(reporter), map[string]any{"round-agents": 2, "round-share": len(want), "round-checked": len(want)})
	c.Check(ids(env.checked(0)), gc.DeepEquals, want)
	s.agents.set(func(f *fakeAgents) {
		c.Check(f.ttls[0], gc.Equals, 15*time.Second)
	})
}

// An agent that is listed but not live has no share.
func (s *workerSuite) TestAnAgentNotLiveHasNoShare(c *gc.C) {
	all := s.addResources(20)
	s.agents.setLive("agent-a", "agent-b")
	s.agents.set(func(f *fakeAgents) {
		f.agents[1].Live = false
	})
	env := newRecordingEnviron(s.clock)
	s.environs.envs["pool"] = env
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Assert(s.clock.WaitAdvance(time.Minute-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	waitReport(c, w.(reporter), map[string]any{"round-agents": 1, "round-share": len(all), "round-checked": len(all)})
	c.Check(ids(env.checked(0)), gc.DeepEquals, all)
}

// When the agents cannot be listed a round checks every resource, other agents' shares
// too, rather than none, and says so.
func (s *workerSuite) TestCannotListTheAgentsChecksEveryResource(c *gc.C) {
	all := s.addResources(20)
	s.agents.set(func(f *fakeAgents) { f.err = errors.New("connection refused") })
	logs := newLogCapture()
	s.config.Logger = slog.New(logs)
	env := newRecordingEnviron(s.clock)
	s.environs.envs["pool"] = env
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Assert(s.clock.WaitAdvance(time.Minute-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	waitReport(c, w.(reporter), map[string]any{"round-agents": 1, "round-share": len(all), "round-checked": len(all), "last-agents-error": "connection refused"})
	c.Check(ids(env.checked(0)), gc.DeepEquals, all)
	logs.waitCount(c, "cannot list the live agents; this round checks every resource, other agents' shares too", 1)
}

// A round that finds more of its share than it estimated paces the rest by the share it has
// found: of the resources it has not read it expects the fraction of its share among those
// it has read, not every one of them. Here its share is four of six resources (estimated
// three) and the fourth turns up on the last page: it gets the whole rest of the interval,
// a slot from 50s to 60s, instead of a third of it.
func (s *workerSuite) TestPacesTheRestByTheShareItFound(c *gc.C) {
	agents := []string{"agent-a", "agent-b"}
	s.agents.setLive(agents...)
	var candidates []string
	for i := range 100 {
		candidates = append(candidates, fmt.Sprintf("r%02d", i))
	}
	shares := sharesOf(agents, candidates)
	mine := shares["agent-a"][:4]
	var theirs []string
	for _, id := range shares["agent-b"] {
		if id > mine[3] && len(theirs) < 2 {
			theirs = append(theirs, id)
		}
	}
	for _, id := range append(slices.Clone(mine), theirs...) {
		s.store.add(id)
	}
	s.config.Rand = sequence(0.5)
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// Three checks expected: 20s slots.
	for i, at := range []time.Duration{10 * time.Second, 30 * time.Second, 50 * time.Second} {
		c.Assert(s.clock.WaitAdvance(at-s.clock.Now().Sub(s.t0), testkit.LongWait, 1), gc.IsNil)
		c.Check(s.env.calls.Next(c), gc.Equals, call{id: mine[i], at: s.t0.Add(at)})
	}
	// The next page holds the fourth check of its share and the other agent's two.
	c.Assert(s.clock.WaitAdvance(5*time.Second-time.Millisecond, testkit.LongWait, 1), gc.IsNil)
	s.env.calls.None(c, shortWait)
	c.Assert(s.clock.WaitAdvance(time.Millisecond, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: mine[3], at: s.t0.Add(55 * time.Second)})
	waitReport(c, w.(reporter), map[string]any{"round-resources": 4, "round-share": 4, "round-checked": 4})
}

// Without Agents the worker is alone on its store and checks every resource.
func (s *workerSuite) TestWithoutAgentsChecksEveryResource(c *gc.C) {
	all := s.addResources(20)
	s.config.Agents = nil
	env := newRecordingEnviron(s.clock)
	s.environs.envs["pool"] = env
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Assert(s.clock.WaitAdvance(time.Minute-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	waitReport(c, w.(reporter), map[string]any{"round-agents": 1, "round-share": len(all), "round-checked": len(all)})
	c.Check(ids(env.checked(0)), gc.DeepEquals, all)
}
