package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// summarizer is what an environ may offer to describe itself in one line.
type summarizer interface {
	Summary() string
}

func newCheckConfigCommand(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "check-config",
		Short: "Check a provisioner set without starting the agent",
		Long: `Build every provisioner of the set exactly as berth run would, list them, and exit non-zero
with an error naming the provisioner and the field when the set is invalid. It needs no
database: provisioners only parse their specs here.

The set comes from --provisioners FILE, else from BERTH_PROVISIONER_SET_JSON; the default
provisioner from --default-provisioner or BERTH_DEFAULT_PROVISIONER (optional when the set has
exactly one provisioner).`,
		Example: `  berth check-config --provisioners provisioners.json --default-provisioner pool
  BERTH_PROVISIONER_SET_JSON="$(cat provisioners.json)" berth check-config -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			logger, err := opts.newLogger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			set, _, source, err := loadProvisionerSet(opts, logger)
			if err != nil {
				return err
			}
			report := describeSet(set)
			if err := set.Close(); err != nil {
				return err
			}
			if format != outputTable {
				return writeData(cmd.OutOrStdout(), format, map[string]any{"source": source, "default": set.Default, "provisioners": report})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTYPE\tDEFAULT\tSUMMARY")
			for _, p := range report {
				marker := ""
				if p.Default {
					marker = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Type, marker, tableText(p.Summary))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "provisioner set from %s is valid: %d provisioner(s), default %q\n", source, len(report), set.Default)
			return err
		},
	}
}

// loadProvisionerSet reads the provisioner set and builds it as the agent would, but with no
// database behind it (initialisers only parse their specs), so a bad set is reported before
// anything starts. It returns the set, which the caller closes, its JSON and where it came from.
func loadProvisionerSet(opts *globalOptions, logger *slog.Logger) (*environ.Set, []byte, string, error) {
	data, source, err := opts.provisionerSetJSON()
	if err != nil {
		return nil, nil, "", err
	}
	set, err := newRegistryFor(data).NewSet(data, opts.defaultProvisioner, environ.Deps{
		Slots:  noSlots{},
		Logger: logger,
		Clock:  opts.clock,
	})
	if err != nil {
		return nil, nil, source, fmt.Errorf("provisioner set from %s is invalid: %w", source, err)
	}
	return set, data, source, nil
}

type provisionerReport struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Default bool   `json:"default"`
	Summary string `json:"summary,omitempty"`
}

func describeSet(set *environ.Set) []provisionerReport {
	names := set.Names()
	out := make([]provisionerReport, 0, len(names))
	for _, name := range names {
		env := set.Environs[name]
		p := provisionerReport{Name: name, Type: env.Type(), Default: name == set.Default}
		if s, ok := env.(summarizer); ok {
			p.Summary = s.Summary()
		}
		out = append(out, p)
	}
	return out
}

// noSlots stands in for the slot store while a set is only checked: building a provisioner
// must not touch it.
type noSlots struct{}

var errNoSlots = errors.New("check-config has no database: a provisioner must not use slot reservations while its spec is checked")

func (noSlots) ReserveSlots(context.Context, domain.SlotRequest, domain.PickHost) (domain.Reservation, error) {
	return domain.Reservation{}, errNoSlots
}

func (noSlots) ReleaseSlots(context.Context, string, string, *domain.Lease) error { return errNoSlots }

func (noSlots) ListReservations(context.Context, string) ([]domain.Reservation, error) {
	return nil, errNoSlots
}
