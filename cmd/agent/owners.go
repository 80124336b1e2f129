package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
)

// ownerRow is one owner as `berth owners` lists it. A column of another concern (an owner's
// quota, its usage) is a field here, a column of ownerListing and a key of ownerJSON.
type ownerRow struct {
	domain.OwnerSummary
	Quotas []domain.QuotaUsage // its quotas with its usage under each, by provisioner
}

// ownerJSON is an owner as -o json prints it.
type ownerJSON struct {
	Owner     string      `json:"owner"`
	Weight    int         `json:"weight"`
	Class     string      `json:"class"`
	Policy    bool        `json:"policy"` // whether the operator set one; else the defaults
	Resources int         `json:"resources"`
	Queued    int         `json:"queued"`
	UpdatedAt *time.Time  `json:"updated_at,omitempty"`
	Quotas    []quotaJSON `json:"quotas"`
}

const ownersHelp = `Berth's agents serve the owners' work in weighted turns: while several owners have
resources waiting, an owner of weight 3 has three reconciled for each one of an owner of weight
1, and an owner's burst never keeps another owner's resource waiting behind it (see the
README's "Fairness between owners"). An owner with no policy has weight 1 and the default
class. The agents read the policies every --owner-policies-interval (default 10s).

A policy's class names the owner in the agents' metrics: berth_provisioner_queue_depth is
labelled by class, never by owner, unless an agent runs with --metrics-owner-labels.`

func newOwnersCommand(opts *globalOptions) *cobra.Command {
	var pf printFlags
	cmd := &cobra.Command{
		Use:   "owners",
		Short: "List the owners, their weights in the agents' queue and their queued work",
		Long: `List every owner that has resources or a policy, by owner: its WEIGHT and CLASS (set with
berth owners set; an owner without a policy shows the defaults, 1 and none), how many
RESOURCES it has, and how many of them are QUEUED (need the agents' attention: being
created, changed, deleted, retried or woken), and its QUOTAS: for each provisioner it has a
quota on (berth quota set), what it holds there against each cap. The default owner ("") is
listed as (none).

` + ownersHelp + `

` + printHelp,
		Example: `  berth owners
  berth owners -o json
  berth owners set acme --weight 5 --class gold
  berth owners unset acme`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := opts.printerFor(cmd, pf, outputTable, outputWide, outputJSON, outputYAML, outputName, outputJSONPath)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			summaries, err := st.OwnerSummaries(ctx)
			if err != nil {
				return needsSchema(err)
			}
			if len(summaries) == 0 && (p.format == outputTable || p.format == outputWide) {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "No owners: no resource exists and no owner has a policy.")
				return err
			}
			quotas, err := st.ListQuotas(ctx, domain.QuotaFilter{})
			if err != nil {
				return needsSchema(err)
			}
			rows := ownerRows(summaries, quotas)
			return ownerListing.print(cmd.OutOrStdout(), p, rows, opts.clock.Now())
		},
	}
	addPrintFlags(cmd, &pf, false)
	cmd.AddCommand(newOwnersSetCommand(opts), newOwnersUnsetCommand(opts))
	return cmd
}

func newOwnersSetCommand(opts *globalOptions) *cobra.Command {
	var (
		weight int
		class  string
	)
	cmd := &cobra.Command{
		Use:   "set OWNER [--weight N] [--class CLASS]",
		Short: "Set an owner's weight in the agents' queue, or its metrics class",
		Long: `Set OWNER's policy: its --weight (a whole number from 1 to 1000) and its --class (up to 32
lower-case letters, digits and dashes; "" for the default class). What is not given keeps its
value (the default, for an owner without a policy). It takes the agent's database role: a
client role may only read the policies.

` + ownersHelp,
		Example: `  berth owners set acme --weight 5
  berth owners set acme --class gold
  berth owners set "" --weight 2    # the default owner`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			flags := cmd.Flags()
			if !flags.Changed("weight") && !flags.Changed("class") {
				return usageError(errors.New("give --weight, --class or both"))
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			policy, err := st.OwnerPolicy(ctx, args[0])
			switch {
			case errors.Is(err, domain.ErrNotFound):
				policy = domain.OwnerPolicy{Owner: args[0], Weight: domain.DefaultOwnerWeight}
			case err != nil:
				return needsSchema(err)
			}
			if flags.Changed("weight") {
				policy.Weight = weight
			}
			if flags.Changed("class") {
				policy.Class = class
			}
			set, err := st.SetOwnerPolicy(ctx, policy)
			if err != nil {
				return fmt.Errorf("set the policy of owner %s: %w", ownerName(args[0]), err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "owner %s: weight %d, class %s\n", ownerName(set.Owner), set.Weight, classText(set.Class))
			return err
		},
	}
	cmd.Flags().IntVar(&weight, "weight", domain.DefaultOwnerWeight, fmt.Sprintf("the owner's weight in the agents' queue, %d to %d", domain.DefaultOwnerWeight, domain.MaxOwnerWeight))
	cmd.Flags().StringVar(&class, "class", "", "the owner's class in the agents' metrics (berth_provisioner_queue_depth{class})")
	return cmd
}

func newOwnersUnsetCommand(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "unset OWNER",
		Short: "Remove an owner's policy: it has weight 1 and the default class again",
		Long: `Remove OWNER's policy: the agents give it weight 1 and count its queued work under the
default class once they read the policies again. It takes the agent's database role, and
exits 4 when OWNER has no policy.

` + ownersHelp,
		Example: `  berth owners unset acme`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.RemoveOwnerPolicy(ctx, args[0]); err != nil {
				return needsSchema(err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "owner %s: policy removed (weight %d, default class)\n", ownerName(args[0]), domain.DefaultOwnerWeight)
			return err
		},
	}
}

// ownerListing prints owners as `berth owners` does.
var ownerListing = listing[ownerRow]{
	columns: []column[ownerRow]{
		{header: "OWNER", cell: func(o ownerRow, _ time.Time) string { return tableText(ownerName(o.Owner)) }},
		{header: "WEIGHT", cell: func(o ownerRow, _ time.Time) string { return fmt.Sprint(o.Weight) }},
		{header: "CLASS", cell: func(o ownerRow, _ time.Time) string { return classText(o.Class) }},
		{header: "RESOURCES", cell: func(o ownerRow, _ time.Time) string { return fmt.Sprint(o.Resources) }},
		{header: "QUEUED", cell: func(o ownerRow, _ time.Time) string { return fmt.Sprint(o.Queued) }},
		{header: "QUOTAS", cell: func(o ownerRow, _ time.Time) string { return quotasText(o.Quotas) }},
		{header: "POLICY SET", wide: true, cell: func(o ownerRow, _ time.Time) string {
			if !o.HasPolicy {
				return "-"
			}
			return o.UpdatedAt.UTC().Format(time.RFC3339)
		}},
	},
	view: func(o ownerRow) any {
		v := ownerJSON{Owner: o.Owner, Weight: o.Weight, Class: o.Class, Policy: o.HasPolicy, Resources: o.Resources, Queued: o.Queued,
			Quotas: make([]quotaJSON, len(o.Quotas))}
		for i, q := range o.Quotas {
			v.Quotas[i] = quotaListing.view(q).(quotaJSON)
		}
		if o.HasPolicy {
			at := o.UpdatedAt.UTC()
			v.UpdatedAt = &at
		}
		return v
	},
	name: func(o ownerRow) string { return "owner/" + o.Owner },
}

// ownerName shows the default owner ("") as (none).
func ownerName(owner string) string {
	if owner == "" {
		return "(none)"
	}
	return owner
}

// classText shows the default class ("") as "-".
func classText(class string) string {
	if class == "" {
		return "-"
	}
	return class
}

// ownerRows joins the owners with their quotas. An owner with a quota but no resource and no
// policy is listed too, with the default policy.
func ownerRows(summaries []domain.OwnerSummary, quotas []domain.QuotaUsage) []ownerRow {
	rows := make([]ownerRow, 0, len(summaries))
	at := make(map[string]int, len(summaries))
	for _, s := range summaries {
		at[s.Owner] = len(rows)
		rows = append(rows, ownerRow{OwnerSummary: s})
	}
	for _, q := range quotas {
		i, ok := at[q.Owner]
		if !ok {
			i = len(rows)
			at[q.Owner] = i
			rows = append(rows, ownerRow{OwnerSummary: domain.OwnerSummary{
				OwnerPolicy: domain.OwnerPolicy{Owner: q.Owner, Weight: domain.DefaultOwnerWeight}}})
		}
		rows[i].Quotas = append(rows[i].Quotas, q)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Owner < rows[j].Owner })
	return rows
}

// quotasText is an owner's usage under each of its quotas, "pool 3/5 resources 12/16 slots",
// or "-" when it has none.
func quotasText(quotas []domain.QuotaUsage) string {
	if len(quotas) == 0 {
		return "-"
	}
	parts := make([]string, len(quotas))
	for i, q := range quotas {
		parts[i] = fmt.Sprintf("%s %s resources %s slots", q.Provisioner, usedOf(q.Resources, q.MaxResources), usedOf(q.Slots, q.MaxSlots))
	}
	return tableText(strings.Join(parts, "; "))
}
