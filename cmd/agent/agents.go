package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/manifolds"
)

// defaultAgentTTL is berth run's --agent-ttl default, the age of the last heartbeat up to
// which an agent counts as live.
var defaultAgentTTL = manifolds.DefaultConfig().Membership.TTL

// agentJSON is an agent as -o json prints it.
type agentJSON struct {
	ID                  string    `json:"id"`
	Live                bool      `json:"live"`
	Leader              bool      `json:"leader"`
	HeartbeatAgeSeconds float64   `json:"heartbeat_age_seconds"`
	LeasesHeld          int       `json:"leases_held"`
	Version             string    `json:"version"`
	HTTPAddr            string    `json:"http_addr"`
	StartedAt           time.Time `json:"started_at"`
	HeartbeatAt         time.Time `json:"heartbeat_at"`
	Session             int64     `json:"session"`
	// Schema is schemaState's word; SchemaVersion the schema version the agent's build
	// knows (0: unknown), DatabaseSchemaVersion the database's.
	Schema                string `json:"schema"`
	SchemaVersion         int    `json:"schema_version"`
	DatabaseSchemaVersion int    `json:"database_schema_version"`
	// Provisioners names the provisioners of the agent's set; empty for a build from
	// before schema version 16, which does not say.
	Provisioners []string `json:"provisioners"`
}

func newAgentsCommand(opts *globalOptions) *cobra.Command {
	var (
		ttl time.Duration
		pf  printFlags
	)
	cmd := &cobra.Command{
		Use:   "agents [--agent-ttl DURATION]",
		Short: "List the agents sharing the database, and which are live",
		Long: `List the agents registered in the database, by id: whether each is live, how old its last
heartbeat is, whether it is the leader (the one agent that runs environ-wide work:
environ checks and orphan sweeps, capacity samples and warnings, change-log and history pruning),
how many resource leases it holds (resources it is reconciling now), the
Berth version it runs, the address it serves /healthz, /metrics and /debug/engine on, when
it started, and whether its build knows the database's schema (SCHEMA): "current", or
"behind (knows 12, database 13)" for an agent a newer build's migration left behind, which
claims no work and waits to be replaced (see the README's Upgrading), or "unknown" for an
agent of a build from before schema version 13, which does not say. PROVISIONERS names the
provisioners of each agent's set (berth resource create warns of a provisioner no live
agent serves); "-" for an agent of a build from before schema version 16, which does not say.

Every berth run registers when it starts and heartbeats every --heartbeat-interval; an agent
is live while its last heartbeat is younger than --agent-ttl, measured on the database's
clock. Pass the --agent-ttl the agents run with (default 15s). An agent that stopped
gracefully is gone from the list; one that died (kill -9, a lost host) stays listed, not
live, until it is removed after a day of silence, or until it starts again under the same
--agent-id.

AGE is the time since the agent started; -o wide adds STARTED (the time) and SESSION, and
-o name prints agent/ID.

` + printHelp,
		Example: `  berth agents
  berth agents --agent-ttl 30s -o json
  berth agents -o jsonpath='{range [?(@.live==true)]}{.id}{"\t"}{.http_addr}{"\n"}{end}'
  berth agents --sort-by .started_at -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := opts.printerFor(cmd, pf, outputTable, outputWide, outputJSON, outputYAML, outputName, outputJSONPath)
			if err != nil {
				return err
			}
			if ttl <= 0 {
				return usageError(fmt.Errorf("--agent-ttl: must be positive, got %s (pass the --agent-ttl the agents run with)", ttl))
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			agents, err := st.ListAgents(ctx, ttl)
			if err != nil {
				return needsSchema(err)
			}
			if len(agents) == 0 && (p.format == outputTable || p.format == outputWide) {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "No agents are registered: an agent registers when berth run starts.")
				return err
			}
			return agentListing.print(cmd.OutOrStdout(), p, agents, opts.clock.Now())
		},
	}
	addPrintFlags(cmd, &pf, false)
	cmd.Flags().DurationVar(&ttl, "agent-ttl", defaultAgentTTL, "an agent is live while its last heartbeat is younger than this (berth run --agent-ttl)")
	return cmd
}

// agentListing prints agents as `berth agents` does.
var agentListing = listing[domain.Agent]{
	columns: []column[domain.Agent]{
		{header: "ID", cell: func(a domain.Agent, _ time.Time) string { return a.ID }},
		{header: "LIVE", cell: func(a domain.Agent, _ time.Time) string { return yesNo(a.Live) }},
		{header: "LEADER", cell: func(a domain.Agent, _ time.Time) string { return yesNo(a.Leader) }},
		{header: "HEARTBEAT AGE", cell: func(a domain.Agent, _ time.Time) string {
			return a.HeartbeatAge.Round(100 * time.Millisecond).String()
		}},
		{header: "LEASES", cell: func(a domain.Agent, _ time.Time) string { return fmt.Sprint(a.LeasesHeld) }},
		{header: "VERSION", cell: func(a domain.Agent, _ time.Time) string { return a.Version }},
		{header: "HTTP ADDR", cell: func(a domain.Agent, _ time.Time) string { return a.HTTPAddr }},
		{header: "SCHEMA", cell: func(a domain.Agent, _ time.Time) string { return schemaText(a.Schema) }},
		{header: "PROVISIONERS", cell: func(a domain.Agent, _ time.Time) string { return provisionersText(a.Provisioners) }},
		{header: "AGE", aging: true, cell: func(a domain.Agent, now time.Time) string { return ageCell(a.StartedAt, now) }},
		{header: "STARTED", wide: true, cell: func(a domain.Agent, _ time.Time) string { return a.StartedAt.UTC().Format(time.RFC3339) }},
		{header: "SESSION", wide: true, cell: func(a domain.Agent, _ time.Time) string { return fmt.Sprint(a.Session) }},
	},
	view: func(a domain.Agent) any {
		return agentJSON{
			ID: a.ID, Live: a.Live, Leader: a.Leader, HeartbeatAgeSeconds: a.HeartbeatAge.Seconds(), LeasesHeld: a.LeasesHeld,
			Version: a.Version, HTTPAddr: a.HTTPAddr, StartedAt: a.StartedAt.UTC(), HeartbeatAt: a.HeartbeatAt.UTC(),
			Session: a.Session,
			Schema:  schemaState(a.Schema), SchemaVersion: a.Schema.Known, DatabaseSchemaVersion: a.Schema.Database,
			Provisioners: append([]string{}, a.Provisioners...),
		}
	},
	name: func(a domain.Agent) string { return "agent/" + a.ID },
}

// schemaState says how the schema version an agent's build knows stands to the database's:
// "current", "behind" (a newer build migrated the database: the agent claims no work),
// "ahead" (the database went back to an older schema), or "unknown" (a build from before
// the agents table said).
func schemaState(v domain.SchemaVersions) string {
	switch {
	case v.Known == 0:
		return "unknown"
	case v.TooNew():
		return "behind"
	case v.Known > v.Database:
		return "ahead"
	}
	return "current"
}

// schemaText is the SCHEMA column: schemaState, with both versions when they differ.
func schemaText(v domain.SchemaVersions) string {
	state := schemaState(v)
	if state == "behind" || state == "ahead" {
		return fmt.Sprintf("%s (knows %d, database %d)", state, v.Known, v.Database)
	}
	return state
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// provisionersText is the PROVISIONERS column: the names, comma-separated, or "-" when the
// agent does not say.
func provisionersText(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return tableText(strings.Join(names, ","))
}
