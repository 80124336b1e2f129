package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/manifolds"
)

// envAgentAddr gives berth status the agent's address, as --agent-addr does.
const envAgentAddr = "BERTH_AGENT_ADDR"

// databaseCheckTimeout bounds reading the CLI's database's identity when an address is
// given, so that a database that does not answer leaves statusTimeout to ask the agent.
const databaseCheckTimeout = 3 * time.Second

// agentTarget is the agent berth status asks, and what it knows of it beforehand.
type agentTarget struct {
	addr string
	// source names what gave addr, for messages: a flag, the variable, or the agents table.
	source string
	// agent is the agents table's row addr came from; nil when a flag or the variable gave it.
	agent *domain.Agent
	// newest says agent was picked as the one with the newest heartbeat, no agent leading.
	newest bool
	// own is the CLI's database's identity; nil when the CLI has none to check against.
	own *domain.DatabaseIdentity
	// unchecked says why the agent's database could not be checked against the CLI's
	// (shown as a warning); empty when it was, or when the CLI has no database.
	unchecked string
}

// findAgent decides which agent berth status asks: the one at --agent-addr, else the one
// --agent names, else the one at BERTH_AGENT_ADDR, else the leader of the agents table.
func findAgent(ctx context.Context, opts *globalOptions, flagAddr, agentID, envAddr string) (agentTarget, error) {
	flagAddr, agentID, envAddr = strings.TrimSpace(flagAddr), strings.TrimSpace(agentID), strings.TrimSpace(envAddr)
	switch {
	case flagAddr != "" && agentID != "":
		return agentTarget{}, usageError(errors.New("--agent and --agent-addr: pass one of them: --agent picks a registered agent by its id, --agent-addr gives an address"))
	case flagAddr != "":
		return addressedAgent(ctx, opts, flagAddr, "--agent-addr"), nil
	case agentID == "" && envAddr != "":
		return addressedAgent(ctx, opts, envAddr, envAgentAddr), nil
	}
	st, err := opts.openState(ctx)
	if err != nil {
		return agentTarget{}, &rewordedError{
			msg: fmt.Sprintf("cannot read the agents table to find the agent: %v: pass the agent's address as --agent-addr or %s", err, envAgentAddr),
			err: err,
		}
	}
	defer st.Close()
	own, err := st.DatabaseIdentity(ctx)
	if err != nil {
		return agentTarget{}, needsSchema(err)
	}
	agents, err := st.ListAgents(ctx, defaultAgentTTL)
	if err != nil {
		return agentTarget{}, needsSchema(err)
	}
	a, err := pickAgent(agents, agentID, own.Where)
	if err != nil {
		return agentTarget{}, err
	}
	if a.HTTPAddr == "" || strings.HasSuffix(a.HTTPAddr, ":0") {
		return agentTarget{}, fmt.Errorf("agent %s registered no address it can be asked on (--http-addr %q): pass the address its log names (\"serving health, metrics and engine report\") as --agent-addr",
			a.ID, a.HTTPAddr)
	}
	newest := agentID == "" && !a.Leader
	return agentTarget{addr: a.HTTPAddr, source: "the address agent " + a.ID + " registered", agent: &a, newest: newest, own: &own}, nil
}

// addressedAgent is the agent at addr, which source gave. Its database is checked against
// the CLI's when the CLI has one: a database URL, or an embedded database file that exists.
// A database that cannot be read is a warning, not an error: berth status is what shows why
// the agent cannot reach it either.
func addressedAgent(ctx context.Context, opts *globalOptions, addr, source string) agentTarget {
	t := agentTarget{addr: addr, source: source}
	url, err := opts.resolvedDatabaseURL()
	if err != nil {
		t.unchecked = "not checked that the agent works on this CLI's database: " + err.Error()
		return t
	}
	if strings.TrimSpace(opts.databaseURL) == "" {
		if loc, err := store.Parse(url); err == nil && loc.Kind == store.SQLite {
			if _, err := os.Stat(loc.Path); errors.Is(err, fs.ErrNotExist) {
				return t // no database of its own: nothing to check against
			}
		}
	}
	// An unreachable database must leave time to ask the agent.
	ctx, cancel := context.WithTimeout(ctx, databaseCheckTimeout)
	defer cancel()
	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.unchecked = "not checked that the agent works on this CLI's database: " + err.Error()
		return t
	}
	defer st.Close()
	own, err := st.DatabaseIdentity(ctx)
	if err != nil {
		t.unchecked = "not checked that the agent works on this CLI's database: " + needsSchema(err).Error()
		return t
	}
	t.own = &own
	return t
}

// pickAgent returns the agent id names; without id, the leader, else the agent with the
// newest heartbeat (live or not: a running agent that lost the database is worth asking).
func pickAgent(agents []domain.Agent, id, where string) (domain.Agent, error) {
	if len(agents) == 0 {
		return domain.Agent{}, fmt.Errorf("no agent is registered in %s: start one with `berth run` (in a clone, `make run`), "+
			"or pass the address of an agent of another database as --agent-addr or %s", where, envAgentAddr)
	}
	if id != "" {
		for _, a := range agents {
			if a.ID == id {
				return a, nil
			}
		}
		ids := make([]string, len(agents))
		for i, a := range agents {
			ids[i] = a.ID
		}
		return domain.Agent{}, fmt.Errorf("--agent %q: no such agent is registered in %s: pass one of %s (berth agents lists them)",
			id, where, strings.Join(ids, ", "))
	}
	if i := slices.IndexFunc(agents, func(a domain.Agent) bool { return a.Leader }); i >= 0 {
		return agents[i], nil
	}
	return slices.MinFunc(agents, func(a, b domain.Agent) int { return cmp.Compare(a.HeartbeatAge, b.HeartbeatAge) }), nil
}

// describe is the status line that says which agent answered.
func (t agentTarget) describe() string {
	if t.agent == nil {
		return fmt.Sprintf("%s (from %s)", t.addr, t.source)
	}
	a := t.agent
	line := a.ID
	if a.Leader {
		line += " (the leader)"
	}
	line += " on " + t.addr
	switch {
	case !a.Live:
		line += fmt.Sprintf(" (not live: last heartbeat %s ago)", a.HeartbeatAge.Round(time.Second))
	case t.newest:
		line += " (no agent leads: the newest heartbeat)"
	}
	return line
}

// noAnswer is the error when nothing answers on the agent's address, with the likely fix.
func (t agentTarget) noAnswer(cause error) string {
	switch {
	case t.agent == nil && t.source == "--agent-addr":
		return fmt.Sprintf("no agent answers on %s: is `berth run` running with --http-addr %s? (%v)", t.addr, t.addr, cause)
	case t.agent == nil:
		return fmt.Sprintf("no agent answers on %s (from %s): is `berth run` running with --http-addr %s? (%v)", t.addr, t.source, t.addr, cause)
	case t.agent.Live:
		return fmt.Sprintf("agent %s is live but does not answer on %s, the address it registered (%v): run berth status where it runs, or pass an address of it this machine reaches as --agent-addr",
			t.agent.ID, t.addr, cause)
	}
	return fmt.Sprintf("agent %s does not answer on %s, the address it registered (%v): its last heartbeat was %s ago, so it has stopped or lost the database: start it again (berth run), or pick a live one with --agent (berth agents lists them)",
		t.agent.ID, t.addr, cause, t.agent.HeartbeatAge.Round(time.Second))
}

// checkDatabase compares the database the agent reports with the CLI's and returns the
// status line that describes it. An agent of another database is an error naming both;
// one that reports none (its database worker is not running) leaves t.unchecked set.
func (t *agentTarget) checkDatabase(report map[string]any) (string, error) {
	id, where, why := reportedDatabase(report)
	if id == "" {
		if t.own != nil {
			t.unchecked = fmt.Sprintf("not checked that the agent on %s works on this CLI's %s: it reports no database (%s)", t.addr, t.own.Where, why)
		}
		return "not reported (" + why + ")", nil
	}
	if t.own == nil {
		return fmt.Sprintf("%s (id %s)", where, id), nil
	}
	if id != t.own.ID {
		fix := "point the CLI at the agent's database (--database-url or " + envDatabaseURL + "), or ask an agent of this one: without " + t.source + ", berth status finds it in the agents table"
		if t.agent != nil {
			fix = "agent " + t.agent.ID + " has stopped and another agent serves that address: start " + t.agent.ID + " again, or pick a live agent with --agent (berth agents lists them)"
		}
		return "", fmt.Errorf("the agent on %s works on another database: %s (id %s), while this CLI uses %s (id %s): %s",
			t.addr, where, id, t.own.Where, t.own.ID, fix)
	}
	return fmt.Sprintf("%s (id %s, the CLI's database)", where, id), nil
}

// reportedDatabase reads the database the agent's database worker reports, or why there is
// none.
func reportedDatabase(report map[string]any) (id, where, why string) {
	workers, _ := report["manifolds"].(map[string]any)
	m, _ := workers[manifolds.DatabaseName].(map[string]any)
	own, _ := m["report"].(map[string]any)
	id, _ = own[domain.IdentityReportID].(string)
	where, _ = own[domain.IdentityReportWhere].(string)
	switch state := stringField(m, "state"); {
	case id != "":
		return id, where, ""
	case m == nil:
		return "", "", "its engine runs no database worker"
	case state != "started":
		return "", "", "its database worker is " + orDash(state)
	}
	return "", "", "its database worker does not say which: a Berth release from before berth status checked it"
}

// completeAgents completes --agent with the ids of the agents registered in the database.
func completeAgents(opts *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		agents, err := listAgentsForCompletion(cmd.Context(), opts)
		if err != nil {
			cobra.CompErrorln(err.Error())
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, a := range agents {
			if strings.HasPrefix(a.ID, toComplete) && !strings.ContainsAny(a.ID, " \t\n") {
				desc := "on " + tableText(a.HTTPAddr)
				if a.Leader {
					desc = "the leader, " + desc
				}
				if !a.Live {
					desc += ", not live"
				}
				out = append(out, cobra.CompletionWithDesc(a.ID, desc))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func listAgentsForCompletion(ctx context.Context, opts *globalOptions) ([]domain.Agent, error) {
	st, err := opts.openState(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.ListAgents(ctx, defaultAgentTTL)
}
