package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	jujuerrors "github.com/juju/errors"
	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
)

// accessStore is the client contract's administration, which only PostgreSQL has: SQLite
// has no roles.
type accessStore interface {
	GrantClientRole(ctx context.Context, role string) error
	Access(ctx context.Context) (domain.Access, error)
	GrantOwners(ctx context.Context, role string, owners []string) error
	RevokeOwners(ctx context.Context, role string, owners []string) error
	OwnerGrants(ctx context.Context) ([]domain.OwnerGrant, error)
	SetOwnerIsolation(ctx context.Context, on bool) error
}

// errNoRoles is what the role commands say on SQLite.
var errNoRoles = jujuerrors.NewNotSupported(nil, "the SQLite store has no database roles: every process that can write its file has the agent's rights (see the README's client contract); use PostgreSQL for client roles and owner isolation")

// openAccessStore opens the database for a role command; close it with the returned func.
func openAccessStore(ctx context.Context, opts *globalOptions) (accessStore, func(), error) {
	st, err := opts.openState(ctx)
	if err != nil {
		return nil, nil, err
	}
	as, ok := st.(accessStore)
	if !ok {
		st.Close()
		return nil, nil, errNoRoles
	}
	return as, st.Close, nil
}

// grantClientRole gives role a client's rights, for berth migrate --client-role.
func grantClientRole(ctx context.Context, st store.DB, role string) error {
	as, ok := st.(accessStore)
	if !ok {
		return fmt.Errorf("--client-role: %w", errNoRoles)
	}
	if err := as.GrantClientRole(ctx, role); err != nil {
		return fmt.Errorf("--client-role: %w", err)
	}
	return nil
}

// accessJSON is berth doctor's report as -o json prints it.
type accessJSON struct {
	Database       string   `json:"database"`
	Role           string   `json:"role"`
	Acts           string   `json:"acts_as"`
	TablesOwner    string   `json:"tables_owner"`
	SchemaVersion  int      `json:"schema_version"`
	Read           bool     `json:"read"`
	Create         bool     `json:"create"`
	Update         bool     `json:"update"`
	Delete         bool     `json:"delete"`
	ReadEvents     bool     `json:"read_events"`
	OwnerIsolation bool     `json:"owner_isolation"`
	Owners         []string `json:"owners"`
	Notes          []string `json:"notes"`
}

// report is a's report, with what it means for who should use the URL.
func report(where string, a domain.Access) accessJSON {
	r := accessJSON{
		Database: where, Role: a.Role, TablesOwner: a.TablesOwner, SchemaVersion: a.SchemaVersion,
		Read: a.Read, Create: a.Create, Update: a.Update, Delete: a.Delete, ReadEvents: a.ReadEvents,
		OwnerIsolation: a.OwnerIsolation, Owners: a.Owners, Acts: "client",
	}
	if r.Owners == nil {
		r.Owners = []string{}
	}
	switch {
	case a.Agent:
		r.Acts = "agent"
		r.Notes = append(r.Notes, "this role acts as the agent: it may write every column, so give it to berth run and berth migrate only; give clients a role of their own (berth migrate --client-role NAME)")
		if a.Superuser {
			r.Notes = append(r.Notes, "this role is a superuser: no grant or trigger restricts it")
		}
	case !a.Read || !a.Create || !a.Update || !a.Delete || !a.ReadEvents:
		r.Acts = "none"
		r.Notes = append(r.Notes, fmt.Sprintf("this role lacks a client's rights: run berth migrate --client-role %s with the agent's URL", a.Role))
	default:
		r.Notes = append(r.Notes, "this role is a client: it writes type, name, owner, provisioner, args, labels, paused, hibernate and retry_requested_at, and deletes; the agent's columns are refused")
		if a.OwnerIsolation {
			if len(a.Owners) == 0 {
				r.Notes = append(r.Notes, fmt.Sprintf("owner isolation is on and no owner is granted to this role: it sees no resource (berth access grant %s OWNER)", a.Role))
			} else {
				r.Notes = append(r.Notes, "owner isolation is on: this role sees and writes the resources of its owners only")
			}
		}
	}
	return r
}

func newDoctorCommand(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say what the database URL's role may do with Berth's tables",
		Long: `Connect with the database URL (--database-url or BERTH_DATABASE_URL) and report as which
role, and what that role may do: whether it acts as the agent (it owns Berth's tables, or is
a member of their owner, or a superuser) or as a client (the rights berth migrate
--client-role grants), its rights on resources and their history, the schema version, and,
with owner isolation on, the owners it acts for. Run it with the URL you give a client
before you give it.

On SQLite there are no roles: every process that can write the file has the agent's rights.`,
		Example: `  berth doctor --database-url postgres://app@db.internal/berth
  berth doctor -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			url, err := opts.resolvedDatabaseURL()
			if err != nil {
				return err
			}
			st, err := opts.openState(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			var r accessJSON
			if as, ok := st.(accessStore); ok {
				a, err := as.Access(cmd.Context())
				if err != nil {
					return needsSchema(err)
				}
				r = report(store.Redact(url), a)
			} else {
				r = accessJSON{Database: store.Redact(url), Acts: "agent", Read: true, Create: true, Update: true, Delete: true, ReadEvents: true,
					Owners: []string{}, Notes: []string{"SQLite has no roles: every process that can write the file (the agent, the CLI, the sqlite3 shell) acts as the agent; only the rules that bind every writer hold there (see the README's client contract)"}}
			}
			if format != outputTable {
				return writeData(cmd.OutOrStdout(), format, r)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			owners := strings.Join(r.Owners, ", ")
			if !r.OwnerIsolation {
				owners = "all (owner isolation is off)"
			}
			for _, row := range [][2]string{
				{"database", r.Database},
				{"role", r.Role},
				{"acts as", r.Acts},
				{"tables owner", r.TablesOwner},
				{"schema version", fmt.Sprint(r.SchemaVersion)},
				{"resources", rights(r)},
				{"history", pick(r.ReadEvents, "read", "no access")},
				{"owners", owners},
			} {
				fmt.Fprintf(tw, "%s:\t%s\n", row[0], tableText(row[1]))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, n := range r.Notes {
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), "note: "+n); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func onOff(on bool) string { return pick(on, "on", "off") }

func rights(r accessJSON) string {
	var out []string
	for _, p := range []struct {
		has  bool
		name string
	}{{r.Read, "read"}, {r.Create, "create"}, {r.Update, "update"}, {r.Delete, "delete"}} {
		if p.has {
			out = append(out, p.name)
		}
	}
	if r.Acts == "agent" {
		return "every column (agent)"
	}
	if len(out) == 0 {
		return "no access"
	}
	return strings.Join(out, ", ") + " (client columns)"
}

func pick(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func newAccessCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "access",
		Short: "Keep client roles to the owners they act for (PostgreSQL)",
		Long: `Owner isolation keeps each client role to the resources of the owners granted to it: with it
on, a client sees, creates, updates and deletes only those owners' resources and reads only
their history. The agent (the role that owns Berth's tables) sees everything. It is off by
default; turn it on with berth access isolation on, after granting each client role its
owners. Every subcommand needs the agent's database URL, except list.`,
		Example: `  berth access grant app_team_a team-a
  berth access isolation on
  berth access list`,
		Args: cobra.NoArgs,
	}
	change := func(use, short, long, example string, apply func(accessStore, context.Context, string, []string) error, done string) *cobra.Command {
		return &cobra.Command{
			Use:     use + " ROLE OWNER [OWNER...]",
			Short:   short,
			Long:    long,
			Example: example,
			Args:    cobra.MinimumNArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				as, closeStore, err := openAccessStore(cmd.Context(), opts)
				if err != nil {
					return err
				}
				defer closeStore()
				if err := apply(as, cmd.Context(), args[0], args[1:]); err != nil {
					return needsSchema(err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %s\n", done, args[0], strings.Join(args[1:], ", "))
				return err
			},
		}
	}
	cmd.AddCommand(
		change("grant", "Let a client role act for owners",
			`Let the client role ROLE see and write the resources of each OWNER when owner isolation is
on. Owners already granted stay. It needs the agent's database URL.`,
			"  berth access grant app_team_a team-a team-b",
			accessStore.GrantOwners, "granted to"),
		change("revoke", "Take owners from a client role",
			`Take each OWNER from the client role ROLE: with owner isolation on, it no longer sees or
writes their resources. Owners it was not granted are ignored. It needs the agent's database
URL.`,
			"  berth access revoke app_team_a team-b",
			accessStore.RevokeOwners, "revoked from"),
		&cobra.Command{
			Use:   "list",
			Short: "List the owners each client role acts for, and whether isolation is on",
			Long: `List every grant of an owner to a client role, and whether owner isolation is on. A client
role sees its own grants only.`,
			Example: "  berth access list\n  berth access list -o json",
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				format, err := opts.outputFormat()
				if err != nil {
					return err
				}
				as, closeStore, err := openAccessStore(cmd.Context(), opts)
				if err != nil {
					return err
				}
				defer closeStore()
				a, err := as.Access(cmd.Context())
				if err != nil {
					return needsSchema(err)
				}
				grants, err := as.OwnerGrants(cmd.Context())
				if err != nil {
					return err
				}
				if format != outputTable {
					return writeData(cmd.OutOrStdout(), format, map[string]any{"owner_isolation": a.OwnerIsolation, "grants": grants})
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ROLE\tOWNER\tGRANTED")
				for _, g := range grants {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", tableText(g.Role), tableText(g.Owner), g.GrantedAt.Format("2006-01-02T15:04:05Z"))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "owner isolation is %s\n", onOff(a.OwnerIsolation))
				return err
			},
		},
		&cobra.Command{
			Use:   "isolation on|off",
			Short: "Turn owner isolation on or off",
			Long: `Turn row-level security on resources and their history on (each client role sees and writes
the resources of its granted owners only) or off (every client role sees every owner's). It
needs the agent's database URL; the agent is not subject to it.`,
			Example:   "  berth access isolation on",
			Args:      cobra.ExactArgs(1),
			ValidArgs: []string{"on", "off"},
			RunE: func(cmd *cobra.Command, args []string) error {
				var on bool
				switch args[0] {
				case "on":
					on = true
				case "off":
				default:
					return fmt.Errorf("isolation: %q is neither on nor off", args[0])
				}
				as, closeStore, err := openAccessStore(cmd.Context(), opts)
				if err != nil {
					return err
				}
				defer closeStore()
				if err := as.SetOwnerIsolation(cmd.Context(), on); err != nil {
					if errors.Is(err, domain.ErrForbidden) {
						return err
					}
					return needsSchema(err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "owner isolation is %s\n", args[0])
				return err
			},
		},
	)
	return cmd
}
