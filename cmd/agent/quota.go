package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
)

// quotaJSON is a quota as -o json prints it; a null maximum is no cap.
type quotaJSON struct {
	Owner        string    `json:"owner"`
	Provisioner  string    `json:"provisioner"`
	Resources    int64     `json:"resources"`
	MaxResources *int64    `json:"max_resources"`
	Slots        int64     `json:"slots"`
	MaxSlots     *int64    `json:"max_slots"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// quotaFormats are the -o values of the quota commands.
var quotaFormats = []string{outputTable, outputJSON, outputYAML, outputJSONPath}

// quotaHelp is what every quota command's help says of quotas.
const quotaHelp = `A quota caps what one owner holds on one provisioner: RESOURCES, how many of its resources,
and SLOTS, the sum of their sizes in the provisioner's own unit (a runtime's slots; a
resource whose size the provisioner cannot tell counts 0 slots and 1 resource). Either may
be left uncapped. The agent admits a resource against its owner's quota before it creates or
grows it; one that would go over waits, with reason QuotaExceeded and a message naming the
quota and the usage (a resize keeps serving its old size meanwhile), and proceeds when the
usage drops (a resource of the owner deleted) or the quota rises. A resource counts from its
admission until its row is removed; a shrink counts once applied. Agents sharing a database
share its quotas: an admission locks the quota's row, so no two agents admit past it.`

func newQuotaCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Cap what an owner holds on a provisioner (resources and slots)",
		Long: quotaHelp + `

berth quota set writes a quota, berth quota unset removes one, berth quota get and list show
them with the owner's usage. On PostgreSQL only the agent's role (the owner of Berth's
tables) writes quotas; a client role reads them.`,
		Example: `  berth quota set acme --provisioner pool --resources 10 --slots 32
  berth quota list
  berth quota get acme -o json
  berth quota unset acme --provisioner pool`,
	}
	cmd.AddCommand(newQuotaSetCommand(opts), newQuotaGetCommand(opts), newQuotaListCommand(opts), newQuotaUnsetCommand(opts))
	return cmd
}

func newQuotaSetCommand(opts *globalOptions) *cobra.Command {
	var provisioner, resources, slots string
	cmd := &cobra.Command{
		Use:   "set OWNER --provisioner NAME [--resources N|none] [--slots N|none]",
		Short: "Set an owner's quota on a provisioner",
		Long: `Set the quota of OWNER on the provisioner --provisioner names: --resources caps how many of
its resources the provisioner holds, --slots the sum of their slots. Give at least one; a
measure not given keeps the cap it had (none, for a new quota), and none removes that cap.
Values are whole numbers, 0 or more: --resources 0 admits nothing new.

A quota below what the owner holds now is allowed: nothing is evicted, and the owner's new
resources and resizes on the provisioner wait until its usage drops below the quota; the
command warns when that is so. Resources waiting for the quota are retried at once.

` + quotaHelp,
		Example: `  berth quota set acme --provisioner pool --resources 10 --slots 32
  berth quota set acme --provisioner pool --slots none
  berth quota set acme --provisioner pool --resources 0   # admit nothing new`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := opts.printerFor(cmd, printFlags{}, quotaFormats...)
			if err != nil {
				return err
			}
			c := domain.QuotaChange{Owner: args[0], Provisioner: provisioner}
			if err := checkQuotaTarget(c.Owner, c.Provisioner); err != nil {
				return err
			}
			flags := cmd.Flags()
			if !flags.Changed("resources") && !flags.Changed("slots") {
				return usageError(errors.New("give --resources, --slots or both (a whole number, or none to remove that cap)"))
			}
			if flags.Changed("resources") {
				if c.Resources, err = parseQuotaLimit("--resources", resources); err != nil {
					return err
				}
			}
			if flags.Changed("slots") {
				if c.Slots, err = parseQuotaLimit("--slots", slots); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			q, err := st.SetQuota(ctx, c)
			if err != nil {
				return needsSchema(err)
			}
			if warning := overQuota(q); warning != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+warning)
			}
			return quotaListing.printOne(cmd.OutOrStdout(), p, q, opts.clock.Now())
		},
	}
	cmd.Flags().StringVar(&provisioner, "provisioner", "", "the provisioner the quota applies on (required)")
	cmd.Flags().StringVar(&resources, "resources", "", "most resources the owner holds on the provisioner, or none")
	cmd.Flags().StringVar(&slots, "slots", "", "most slots the owner's resources there add up to, or none")
	return cmd
}

func newQuotaGetCommand(opts *globalOptions) *cobra.Command {
	var (
		provisioner string
		pf          printFlags
	)
	cmd := &cobra.Command{
		Use:   "get OWNER [--provisioner NAME]",
		Short: "Show an owner's quotas and usage",
		Long: `Show the quotas of OWNER, on every provisioner or the one --provisioner names, with what the
owner holds there: RESOURCES and SLOTS read used/max ("none": no cap). An owner with no
quota there is not found (exit code 4): it is not capped.

` + quotaHelp + `

` + printHelp,
		Example: `  berth quota get acme
  berth quota get acme --provisioner pool -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := opts.printerFor(cmd, pf, quotaFormats...)
			if err != nil {
				return err
			}
			if args[0] == "" {
				return usageError(errors.New("OWNER: must not be empty"))
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			quotas, err := st.ListQuotas(ctx, domain.QuotaFilter{Owner: args[0], Provisioner: provisioner})
			if err != nil {
				return needsSchema(err)
			}
			if len(quotas) == 0 {
				where := ""
				if provisioner != "" {
					where = fmt.Sprintf(" on provisioner %q", provisioner)
				}
				return fmt.Errorf("owner %q has no quota%s: it is not capped (berth quota set sets one): %w", args[0], where, domain.ErrNotFound)
			}
			return quotaListing.print(cmd.OutOrStdout(), p, quotas, opts.clock.Now())
		},
	}
	addPrintFlags(cmd, &pf, false)
	cmd.Flags().StringVar(&provisioner, "provisioner", "", "only the quota on this provisioner")
	return cmd
}

func newQuotaListCommand(opts *globalOptions) *cobra.Command {
	var pf printFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every owner's quotas and usage",
		Long: `List every quota, by owner and provisioner, with what the owner holds there: RESOURCES and
SLOTS read used/max ("none": no cap). Owners without a quota are not capped and not listed.

` + quotaHelp + `

` + printHelp,
		Example: `  berth quota list
  berth quota list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := opts.printerFor(cmd, pf, quotaFormats...)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			quotas, err := st.ListQuotas(ctx, domain.QuotaFilter{})
			if err != nil {
				return needsSchema(err)
			}
			if len(quotas) == 0 && p.format == outputTable {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "No quotas are set: every owner is uncapped (berth quota set sets one).")
				return err
			}
			return quotaListing.print(cmd.OutOrStdout(), p, quotas, opts.clock.Now())
		},
	}
	addPrintFlags(cmd, &pf, false)
	return cmd
}

func newQuotaUnsetCommand(opts *globalOptions) *cobra.Command {
	var provisioner string
	cmd := &cobra.Command{
		Use:   "unset OWNER --provisioner NAME",
		Short: "Remove an owner's quota on a provisioner",
		Long: `Remove the quota of OWNER on the provisioner --provisioner names: the owner is no longer
capped there, and its resources waiting for the quota are retried at once. A quota that
does not exist is not found (exit code 4).`,
		Example: `  berth quota unset acme --provisioner pool`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkQuotaTarget(args[0], provisioner); err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.RemoveQuota(ctx, args[0], provisioner); err != nil {
				return needsSchema(err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "quota of owner %q on provisioner %q removed\n", args[0], provisioner)
			return err
		},
	}
	cmd.Flags().StringVar(&provisioner, "provisioner", "", "the provisioner the quota applies on (required)")
	return cmd
}

// checkQuotaTarget refuses an empty owner or --provisioner, as a usage error.
func checkQuotaTarget(owner, provisioner string) error {
	switch {
	case owner == "":
		return usageError(errors.New("OWNER: must not be empty: name the owner the quota caps"))
	case provisioner == "":
		return usageError(errors.New("--provisioner: required: name the provisioner the quota applies on"))
	}
	return nil
}

// parseQuotaLimit reads the value of a quota flag: a whole number, 0 or more, or none.
func parseQuotaLimit(flag, value string) (domain.QuotaLimit, error) {
	if strings.EqualFold(value, "none") {
		return domain.QuotaLimit{Set: true}, nil
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return domain.QuotaLimit{}, usageError(fmt.Errorf("%s: %q is not a whole number: give 0 or more, or none to remove the cap", flag, value))
	}
	if n < 0 {
		return domain.QuotaLimit{}, usageError(fmt.Errorf("%s: must be 0 or more, got %d (none removes the cap)", flag, n))
	}
	return domain.QuotaLimit{Set: true, Max: &n}, nil
}

// overQuota says, when the owner holds more than q allows, that nothing is evicted; "" when
// it does not.
func overQuota(q domain.QuotaUsage) string {
	var over []string
	if m := q.MaxResources; m != nil && q.Resources > *m {
		over = append(over, fmt.Sprintf("%d resources (quota %d)", q.Resources, *m))
	}
	if m := q.MaxSlots; m != nil && q.Slots > *m {
		over = append(over, fmt.Sprintf("%d slots (quota %d)", q.Slots, *m))
	}
	if len(over) == 0 {
		return ""
	}
	return fmt.Sprintf("owner %q holds %s on provisioner %q, above the quota: nothing is evicted; its new resources and resizes there wait until its usage drops below the quota",
		q.Owner, strings.Join(over, " and "), q.Provisioner)
}

// usedOf is a used/max cell: "3/5", or "3/none" without a cap.
func usedOf(used int64, max *int64) string {
	if max == nil {
		return fmt.Sprintf("%d/none", used)
	}
	return fmt.Sprintf("%d/%d", used, *max)
}

// quotaListing prints quotas as the quota commands do.
var quotaListing = listing[domain.QuotaUsage]{
	columns: []column[domain.QuotaUsage]{
		{header: "OWNER", cell: func(q domain.QuotaUsage, _ time.Time) string { return q.Owner }},
		{header: "PROVISIONER", cell: func(q domain.QuotaUsage, _ time.Time) string { return q.Provisioner }},
		{header: "RESOURCES", cell: func(q domain.QuotaUsage, _ time.Time) string { return usedOf(q.Resources, q.MaxResources) }},
		{header: "SLOTS", cell: func(q domain.QuotaUsage, _ time.Time) string { return usedOf(q.Slots, q.MaxSlots) }},
		{header: "UPDATED", aging: true, cell: func(q domain.QuotaUsage, now time.Time) string { return ageCell(q.UpdatedAt, now) }},
	},
	view: func(q domain.QuotaUsage) any {
		return quotaJSON{Owner: q.Owner, Provisioner: q.Provisioner, Resources: q.Resources, MaxResources: q.MaxResources,
			Slots: q.Slots, MaxSlots: q.MaxSlots, UpdatedAt: q.UpdatedAt.UTC()}
	},
}
