package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/manifolds"
)

// defaultAgentAddr is where `berth run` serves its HTTP endpoints unless --http-addr says
// otherwise.
var defaultAgentAddr = manifolds.DefaultConfig().HTTPServer.Addr

// statusTimeout bounds the whole exchange with the agent.
const statusTimeout = 10 * time.Second

// maxReportSize bounds how much of the agent's answer is read.
const maxReportSize = 16 << 20

func newStatusCommand(opts *globalOptions) *cobra.Command {
	var agentAddr, agentID string
	cmd := &cobra.Command{
		Use:   "status [--agent ID | --agent-addr HOST:PORT]",
		Short: "Show the running agent's workers: state, restarts and last error",
		Long: `Ask a running agent (berth run) for its dependency engine's report, over the HTTP
endpoint it serves on --http-addr, and print which agent and database it is, then one line
per worker: its state (started, starting, stopping, stopped), how often it was started, when
it last started, the error it last stopped with, and what the worker reports about itself
(e.g. the provisioner's queue).

The agent is found in the database's agents table, where every agent registers the address
it serves on (berth agents lists them): the leader by default, or the agent --agent names.
--agent-addr, or BERTH_AGENT_ADDR when neither flag is given, gives the address instead;
then the command works without a database (one that is down gives a warning). Either way,
an agent that reports another database than the CLI's (--database-url, BERTH_DATABASE_URL,
or the embedded one) is refused, naming both.

A worker stopped with an error names what it is waiting for, e.g. the database being
unreachable. -o json prints the report as the agent sent it.`,
		Example: `  berth status
  berth status --agent berth-2
  BERTH_AGENT_ADDR=10.0.0.5:9090 berth status -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), statusTimeout)
			defer cancel()
			target, err := findAgent(ctx, opts, agentAddr, agentID, os.Getenv(envAgentAddr))
			if err != nil {
				return err
			}
			report, err := fetchEngineReport(ctx, target)
			if err != nil {
				return err
			}
			reported, err := target.checkDatabase(report)
			if err != nil {
				return err
			}
			if target.unchecked != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", target.unchecked)
			}
			if format != outputTable {
				return writeData(cmd.OutOrStdout(), format, report)
			}
			if _, err := fmt.Fprintf(cmd.OutOrStdout(), "agent: %s\ndatabase: %s\n", target.describe(), reported); err != nil {
				return err
			}
			return writeEngineReport(cmd.OutOrStdout(), report)
		},
	}
	cmd.Flags().StringVar(&agentAddr, "agent-addr", "", "the address the agent serves HTTP on, its berth run --http-addr (env "+envAgentAddr+"; default: the address the agent registered)")
	cmd.Flags().StringVar(&agentID, "agent", "", "the --agent-id of the agent to ask, as berth agents lists it (default: the leader)")
	mustRegister(cmd, "agent", completeAgents(opts))
	return cmd
}

// fetchEngineReport GETs /debug/engine from the agent at target.addr (host:port, or a URL).
func fetchEngineReport(ctx context.Context, target agentTarget) (map[string]any, error) {
	addr := target.addr
	base := strings.TrimRight(addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/engine", nil)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not an address: pass HOST:PORT, e.g. %s", target.source, addr, defaultAgentAddr)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cause := err
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			cause = urlErr.Err
		}
		return nil, &rewordedError{msg: target.noAnswer(cause), err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReportSize))
	if err != nil {
		return nil, fmt.Errorf("read the agent's report from %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the server on %s answered /debug/engine with %s: is %s the address of `berth run --http-addr`?", addr, resp.Status, target.source)
	}
	var report map[string]any
	if err := json.Unmarshal(body, &report); err != nil {
		return nil, fmt.Errorf("the answer of %s to /debug/engine is not an engine report (%v): is %s the address of `berth run --http-addr`?", addr, err, target.source)
	}
	return report, nil
}

// writeEngineReport prints the engine's state, then one aligned line per worker, by name.
func writeEngineReport(w io.Writer, report map[string]any) error {
	engine := stringField(report, "state")
	if msg := stringField(report, "error"); msg != "" {
		engine += " (" + tableText(msg) + ")"
	}
	if _, err := fmt.Fprintf(w, "engine: %s\n\n", engine); err != nil {
		return err
	}
	manifolds, _ := report["manifolds"].(map[string]any)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tSTATE\tSTARTS\tRESTARTS\tLAST START\tERROR\tREPORT")
	for _, name := range slices.Sorted(maps.Keys(manifolds)) {
		m, _ := manifolds[name].(map[string]any)
		// JSON numbers decode as float64; a worker never started has no start-count.
		starts, _ := m["start-count"].(float64)
		restarts := max(int(starts)-1, 0)
		workerReport, _ := m["report"].(map[string]any)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n",
			name, stringField(m, "state"), int(starts), restarts, orDash(stringField(m, "started")),
			orDash(tableText(stringField(m, "error"))), orDash(tableText(formatMap(workerReport))))
	}
	return tw.Flush()
}

func stringField(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// orDash keeps an empty cell visible in a table.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
