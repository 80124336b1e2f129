package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
)

// defaultTrendWindow is how far back `capacity` looks for the trend.
const defaultTrendWindow = time.Hour

// capacityJSON is what `capacity -o json` prints.
type capacityJSON struct {
	Since        time.Time         `json:"trend_since"`
	Provisioners []provisionerJSON `json:"provisioners"`
	Waiting      []waitingJSON     `json:"waiting_for_capacity"`
	// Hibernated counts the hibernated resources of each provisioner: they hold no capacity,
	// so none of the figures above includes them.
	Hibernated []hibernatedJSON `json:"hibernated"`
	// Breakers are the provisioners' circuit breakers that ever counted a failure.
	Breakers []breakerJSON `json:"breakers"`
}

// breakerJSON is one provisioner's circuit breaker (domain.Breaker).
type breakerJSON struct {
	Provisioner string     `json:"provisioner"`
	State       string     `json:"state"`
	Failures    int        `json:"failures"`
	OpenedAt    *time.Time `json:"opened_at"`
	NextProbeAt *time.Time `json:"next_probe_at"` // while open
	ProbeHolder string     `json:"probe_holder"`  // while half-open
	LastError   string     `json:"last_error"`
}

type hibernatedJSON struct {
	Provisioner string `json:"provisioner"`
	Resources   int    `json:"resources"`
}

// provisionerJSON is one provisioner's latest capacity, warnings and trend.
type provisionerJSON struct {
	Name string `json:"name"`
	capacityFigures
	Warnings []warningJSON `json:"warnings"`
	Hosts    []hostJSON    `json:"hosts"`
}

type hostJSON struct {
	Host string `json:"host"`
	capacityFigures
	Down bool `json:"down"`
}

// capacityFigures are the numbers of one sample (a provisioner's total or one host) and
// their trend.
type capacityFigures struct {
	Unit        string     `json:"unit"`
	SampledAt   time.Time  `json:"sampled_at"`
	Total       int64      `json:"total"`
	Used        int64      `json:"used"`
	Free        int64      `json:"free"`
	UsedPercent float64    `json:"used_percent"`
	Trend       *trendJSON `json:"trend"` // nil: no sample in the window
}

type trendJSON struct {
	Samples int        `json:"samples"`
	MinUsed int64      `json:"min_used"`
	MaxUsed int64      `json:"max_used"`
	Oldest  sampleJSON `json:"oldest"`
	Newest  sampleJSON `json:"newest"`
}

type sampleJSON struct {
	At    time.Time `json:"at"`
	Total int64     `json:"total"`
	Used  int64     `json:"used"`
}

type warningJSON struct {
	Kind    string    `json:"kind"`
	Active  bool      `json:"active"`
	Since   time.Time `json:"since"`
	Message string    `json:"message"`
}

type waitingJSON struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Owner          string    `json:"owner"`
	Provisioner    string    `json:"provisioner"`
	Since          time.Time `json:"since"`
	WaitingSeconds int64     `json:"waiting_seconds"`
	Message        string    `json:"message"`
}

func newCapacityCommand(opts *globalOptions) *cobra.Command {
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "capacity [--since 1h]",
		Short: "Show each provisioner's capacity, its trend, warnings and the resources waiting for room",
		Long: `Show the capacity the agent last sampled for every provisioner that reports it (total and per
host: unit, total, used, free, percent used, whether the host is down), the capacity
warnings in force, how the used capacity moved over --since (lowest and highest, and the
oldest and newest sample of the window), the resources waiting for capacity with how
long each has waited (since it began waiting), how many resources of each provisioner are
hibernated: they hold no capacity, so the figures leave them out, but waking them needs room,
and each provisioner's circuit breaker (closed, open: no agent calls its broker until the
next probe, or half-open: one probe under way), with the failures it counted and the last.
SAMPLED is the age of each sample (kubectl's short form: 5s, 3m); -o jsonpath=TEMPLATE
applies a Kubernetes JSONPath template to what -o json prints.

Down hosts and hosts without capacity count towards neither used nor total when the agent
decides on a warning. The agent samples every --capacity-interval (default 1m); with no
agent running the figures are as old as their sample time says, but for the used (and free)
slots of a pool counted in slots: those are its slot reservations, read when the command
runs, so a runtime just created or deleted shows at once.`,
		Example: `  berth capacity
  berth capacity --since 24h
  berth capacity -o json | jq '.provisioners[] | {name, used_percent}'
  berth capacity -o jsonpath='{range .provisioners[*]}{.name}{" "}{.used_percent}{"\n"}{end}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := opts.printerFor(cmd, printFlags{}, outputTable, outputJSON, outputYAML, outputJSONPath)
			if err != nil {
				return err
			}
			if since <= 0 {
				return usageError(fmt.Errorf("--since: must be positive, got %v (e.g. --since 1h)", since))
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			now := opts.clock.Now()
			from := now.Add(-since)
			latest, err := st.LatestCapacity(ctx)
			if err != nil {
				return needsSchema(err)
			}
			if latest, err = withLiveSlots(ctx, st, latest); err != nil {
				return needsSchema(err)
			}
			trends, err := st.CapacityTrends(ctx, from)
			if err != nil {
				return needsSchema(err)
			}
			warnings, err := st.ListCapacityWarnings(ctx)
			if err != nil {
				return needsSchema(err)
			}
			waiting, err := st.ListWaitingForCapacity(ctx, 0)
			if err != nil {
				return needsSchema(err)
			}
			hibernated, err := st.ListResources(ctx, domain.ListFilter{Status: domain.StatusHibernated})
			if err != nil {
				return needsSchema(err)
			}
			breakers, err := st.ListBreakers(ctx)
			if err != nil {
				return needsSchema(err)
			}
			report := buildCapacityReport(now, from, latest, trends, warnings, waiting)
			report.Hibernated = countByProvisioner(hibernated)
			report.Breakers = breakerReport(breakers)
			if p.format != outputTable {
				return p.data(cmd.OutOrStdout(), report)
			}
			return writeCapacity(cmd.OutOrStdout(), report, since, now)
		},
	}
	cmd.Flags().DurationVar(&since, "since", defaultTrendWindow, "how far back the trend looks (e.g. 30m, 24h)")
	return cmd
}

func buildCapacityReport(now, from time.Time, latest []domain.CapacitySample, trends []domain.CapacityTrend,
	warnings []domain.CapacityWarning, waiting []domain.Resource) capacityJSON {
	trendOf := make(map[[2]string]*trendJSON)
	for _, t := range trends {
		trendOf[[2]string{t.Provisioner, t.Host}] = &trendJSON{
			Samples: t.Samples, MinUsed: t.MinUsed, MaxUsed: t.MaxUsed,
			Oldest: sampleJSON{At: t.Oldest.At.UTC(), Total: t.Oldest.Total, Used: t.Oldest.Used},
			Newest: sampleJSON{At: t.Newest.At.UTC(), Total: t.Newest.Total, Used: t.Newest.Used},
		}
	}
	figures := func(s domain.CapacitySample) capacityFigures {
		return capacityFigures{
			Unit: s.Unit, SampledAt: s.At.UTC(), Total: s.Total, Used: s.Used, Free: s.Free(),
			UsedPercent: usedPercent(s.Used, s.Total), Trend: trendOf[[2]string{s.Provisioner, s.Host}],
		}
	}
	report := capacityJSON{Since: from.UTC(), Provisioners: []provisionerJSON{}, Waiting: []waitingJSON{}}
	index := make(map[string]int)
	for _, s := range latest {
		i, ok := index[s.Provisioner]
		if !ok {
			i = len(report.Provisioners)
			index[s.Provisioner] = i
			report.Provisioners = append(report.Provisioners, provisionerJSON{Name: s.Provisioner, Warnings: []warningJSON{}, Hosts: []hostJSON{}})
		}
		p := &report.Provisioners[i]
		if s.Host == "" {
			p.capacityFigures = figures(s)
		} else {
			p.Hosts = append(p.Hosts, hostJSON{Host: s.Host, capacityFigures: figures(s), Down: s.Down})
		}
	}
	for _, w := range warnings {
		i, ok := index[w.Provisioner]
		if !ok {
			if !w.Active {
				continue
			}
			i = len(report.Provisioners)
			index[w.Provisioner] = i
			report.Provisioners = append(report.Provisioners, provisionerJSON{Name: w.Provisioner, Warnings: []warningJSON{}, Hosts: []hostJSON{}})
		}
		p := &report.Provisioners[i]
		p.Warnings = append(p.Warnings, warningJSON{Kind: w.Kind, Active: w.Active, Since: w.Since.UTC(), Message: w.Message})
	}
	for _, r := range waiting {
		report.Waiting = append(report.Waiting, waitingJSON{
			ID: r.ID, Name: r.Name, Owner: r.Owner, Provisioner: r.Provisioner, Since: waitingSince(r).UTC(),
			WaitingSeconds: int64(max(now.Sub(waitingSince(r)), 0) / time.Second), Message: r.StatusMessage,
		})
	}
	return report
}

// waitingSince is when r began waiting for capacity; its creation for a row that does not say.
func waitingSince(r domain.Resource) time.Time {
	if r.WaitingSince != nil {
		return *r.WaitingSince
	}
	return r.CreatedAt
}

// countByProvisioner counts rs per provisioner, by provisioner name.
func countByProvisioner(rs []domain.Resource) []hibernatedJSON {
	counts := map[string]int{}
	for _, r := range rs {
		counts[r.Provisioner]++
	}
	out := []hibernatedJSON{}
	for _, p := range slices.Sorted(maps.Keys(counts)) {
		out = append(out, hibernatedJSON{Provisioner: p, Resources: counts[p]})
	}
	return out
}

func usedPercent(used, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return math.Round(float64(used)/float64(total)*1000) / 10
}

func writeCapacity(w io.Writer, report capacityJSON, since time.Duration, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(report.Provisioners) == 0 {
		fmt.Fprintln(tw, "no capacity sampled yet: the agent (berth run) samples every provisioner that reports capacity")
	} else {
		fmt.Fprintln(tw, "PROVISIONER\tHOST\tUNIT\tTOTAL\tUSED\tFREE\tUSED%\tDOWN\tSAMPLED\tWARNINGS")
		for _, p := range report.Provisioners {
			var active []string
			for _, warn := range p.Warnings {
				if warn.Active {
					active = append(active, warn.Kind)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", tableText(p.Name), "(total)", figureCells(p.capacityFigures, false, dashIfEmpty(strings.Join(active, ",")), now))
			for _, h := range p.Hosts {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", tableText(p.Name), tableText(h.Host), figureCells(h.capacityFigures, h.Down, "", now))
			}
		}
	}
	fmt.Fprintf(tw, "\nTREND (last %v)\nPROVISIONER\tHOST\tSAMPLES\tMIN USED\tMAX USED\tOLDEST\tNEWEST\n", since)
	for _, p := range report.Provisioners {
		writeTrend(tw, p.Name, "(total)", p.Trend)
		for _, h := range p.Hosts {
			writeTrend(tw, p.Name, h.Host, h.Trend)
		}
	}
	fmt.Fprintln(tw, "\nWARNINGS\nPROVISIONER\tKIND\tSTATE\tSINCE\tMESSAGE")
	for _, p := range report.Provisioners {
		for _, warn := range p.Warnings {
			state := "clear"
			if warn.Active {
				state = "ACTIVE"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", tableText(p.Name), warn.Kind, state, warn.Since.Format(time.RFC3339), tableText(dashIfEmpty(warn.Message)))
		}
	}
	fmt.Fprintf(tw, "\nWAITING FOR CAPACITY (%d)\nID\tNAME\tOWNER\tPROVISIONER\tWAITING\tMESSAGE\n", len(report.Waiting))
	for _, r := range report.Waiting {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, tableText(r.Name), tableText(dashIfEmpty(r.Owner)), tableText(dashIfEmpty(r.Provisioner)),
			time.Duration(r.WaitingSeconds)*time.Second, tableText(r.Message))
	}
	fmt.Fprintln(tw, "\nHIBERNATED (holding no capacity)")
	if len(report.Hibernated) == 0 {
		fmt.Fprintln(tw, "none")
	}
	for _, h := range report.Hibernated {
		fmt.Fprintf(tw, "%s\thibernated: %d\n", tableText(dashIfEmpty(h.Provisioner)), h.Resources)
	}
	writeBreakers(tw, report.Breakers, now)
	return tw.Flush()
}

// breakerReport is the breakers as -o json prints them.
func breakerReport(breakers []domain.Breaker) []breakerJSON {
	out := []breakerJSON{}
	for _, b := range breakers {
		j := breakerJSON{Provisioner: b.Provisioner, State: string(b.State), Failures: b.Failures, ProbeHolder: b.ProbeHolder, LastError: b.LastError}
		if !b.OpenedAt.IsZero() {
			at := b.OpenedAt.UTC()
			j.OpenedAt = &at
		}
		if b.State == domain.BreakerOpen {
			at := b.NextProbeAt.UTC()
			j.NextProbeAt = &at
		}
		out = append(out, j)
	}
	return out
}

// writeBreakers is the table of the breakers: NEXT PROBE is how soon (or "due"), while open.
func writeBreakers(w io.Writer, breakers []breakerJSON, now time.Time) {
	fmt.Fprintln(w, "\nBREAKERS\nPROVISIONER\tSTATE\tFAILURES\tNEXT PROBE\tLAST ERROR")
	if len(breakers) == 0 {
		fmt.Fprintln(w, "none: no broker has failed")
	}
	for _, b := range breakers {
		next := "-"
		switch {
		case b.NextProbeAt != nil && b.NextProbeAt.After(now):
			next = "in " + ageCell(now, *b.NextProbeAt)
		case b.NextProbeAt != nil:
			next = "due"
		case b.ProbeHolder != "":
			next = "under way (" + b.ProbeHolder + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", tableText(b.Provisioner), b.State, b.Failures, tableText(next), tableText(dashIfEmpty(b.LastError)))
	}
}

func figureCells(f capacityFigures, down bool, warnings string, now time.Time) string {
	downText := ""
	if down {
		downText = "down"
	}
	return fmt.Sprintf("%s\t%d\t%d\t%d\t%.1f%%\t%s\t%s\t%s",
		f.Unit, f.Total, f.Used, f.Free, f.UsedPercent, downText, sampledCell(f.SampledAt, now), warnings)
}

// sampledCell is the SAMPLED column: how long ago, "-" for no sample.
func sampledCell(at, now time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return ageCell(at, now) + " ago"
}

func writeTrend(w io.Writer, provisioner, host string, t *trendJSON) {
	if t == nil {
		fmt.Fprintf(w, "%s\t%s\t0\t-\t-\t-\t-\n", tableText(provisioner), tableText(host))
		return
	}
	fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d/%d at %s\t%d/%d at %s\n", tableText(provisioner), tableText(host), t.Samples, t.MinUsed, t.MaxUsed,
		t.Oldest.Used, t.Oldest.Total, t.Oldest.At.Format(time.RFC3339), t.Newest.Used, t.Newest.Total, t.Newest.At.Format(time.RFC3339))
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
