package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

func newResourceCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "resource",
		Aliases: []string{"resources"},
		Short:   "Create, inspect, update and delete resources",
		Long: `Manage the rows of the resources table. Changes are written straight to the database: the
agent notices them and reconciles each resource (watch its status, or use --wait). The
database must already have Berth's schema (berth migrate). The commands on one resource take
its ID or its name (with --owner and --type where several resources share the name).

With -o json every command prints one JSON object (list: a JSON array of them) with exactly
the keys id, type, name, owner, provisioner, status, reason (why the resource is in its
status, one word from the status's documented list), status_message, waiting_since and
last_attempt_at (times, null when unset), args, config, labels, paused, hibernate,
generation, observed_generation, created_at, updated_at and conditions (Ready and Synced, each with type, status,
reason, message, lastTransitionTime and observedGeneration); -o yaml prints the same as
YAML.

The lifecycle controls (pause, resume, hibernate, wake, retry, label) are recorded in the
resource's history; describe shows why a resource is where it is and when it is tried next.`,
		Example: `  id=$(berth resource create --type runtime --name analytics --arg slots=2 | tail -n1)
  berth resource get "$id"
  berth resource get analytics
  berth resource update "$id" --arg slots=4 --wait
  berth resource describe "$id"
  berth resource hibernate "$id"
  berth resource delete "$id" --wait`,
		// Runnable with no args, so that a mistyped subcommand is an error rather than help.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newResourceCreateCommand(opts),
		newResourceGetCommand(opts),
		newResourceListCommand(opts),
		newResourceUpdateCommand(opts),
		newResourceDeleteCommand(opts),
		newResourceEventsCommand(opts),
		newResourceDescribeCommand(opts),
	)
	cmd.AddCommand(newControlCommands(opts)...)
	return cmd
}

func newResourceCreateCommand(opts *globalOptions) *cobra.Command {
	var (
		typ, name, owner, provisioner string
		argPairs, labelPairs          []string
		wait                          bool
		timeout                       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create --type TYPE --name NAME [--owner OWNER] [--provisioner P] [--arg key=value ...] [--label key=value ...]",
		Short: "Create a resource",
		Long: `Create a resource; it starts pending and the agent provisions it.

Resource types and their args:
` + opts.catalog().Help() + `

A resource's name is unique per owner and type (ignoring case). Without --provisioner the
agent's default provisioner takes it. --label tags it (see berth resource label for what
keys and values may be); berth resource list -l selects by labels.

The new resource's id is the last line of the output (with -o json, the "id" field of the one
JSON object printed). With --wait the command returns once the resource is ready (exit 0),
printing its host and client config above the id, or fails with its status message when
provisioning fails or after --timeout (the resource is kept and the agent keeps working on
it).`,
		Example: `  berth resource create --type runtime --name analytics --owner acme --arg slots=2 --arg version=1.4.0
  berth resource create --type runtime --name scratch --label team=data --label tier=dev
  berth resource create --type clickhouse --name events --owner acme --wait --timeout 10m
  berth resource create --type runtime --name scratch -o json | jq -r .id`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			t, err := parseTypeFlag(opts.catalog(), typ)
			if err != nil {
				return err
			}
			args, err := opts.catalog().ParseArgFlags(t, argPairs)
			if err != nil {
				return flagError(err)
			}
			labels, err := parseLabelFlags(labelPairs)
			if err != nil {
				return err
			}
			if err := checkTimeout(wait, timeout); err != nil {
				return err
			}
			ctx := cmd.Context()
			return opts.withServiceAndAgents(ctx, func(svc *domain.Service, agents domain.AgentStore) error {
				r, err := svc.Create(ctx, domain.NewResource{Type: t, Name: name, Owner: owner, Provisioner: provisioner, Args: args, Labels: labels})
				if errors.Is(err, domain.ErrAlreadyExists) {
					return fmt.Errorf("--name: a %s named %q already exists for owner %q: choose another name, or update that one", t, strings.TrimSpace(name), strings.TrimSpace(owner))
				}
				if err != nil {
					return flagError(err)
				}
				warnUnserved(ctx, cmd.ErrOrStderr(), agents, r.ID, r.Provisioner, wait)
				var waitErr error
				if wait {
					r, waitErr = waitReady(cmd, opts, svc, r, false, timeout)
				}
				if format != outputTable {
					return errors.Join(writeData(cmd.OutOrStdout(), format, toJSON(r)), waitErr)
				}
				return errors.Join(writeCreated(cmd.OutOrStdout(), r), waitErr)
			})
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&typ, "type", "", "resource type: "+opts.catalog().Names())
	flags.StringVar(&name, "name", "", "resource name, unique per owner and type (at most 128 characters)")
	flags.StringVar(&owner, "owner", "", "owner the resource belongs to (resources of one owner are spread across hosts)")
	flags.StringVar(&provisioner, "provisioner", "", "provisioner to use (default: the agent's default provisioner)")
	flags.StringArrayVar(&argPairs, "arg", nil, "argument as key=value; repeat for more (e.g. --arg slots=2)")
	flags.StringArrayVar(&labelPairs, "label", nil, "label as key=value; repeat for more (e.g. --label team=data)")
	addWaitFlags(cmd, &wait, &timeout, "until the resource is ready")
	return cmd
}

func newResourceGetCommand(opts *globalOptions) *cobra.Command {
	var (
		ref   resourceRef
		watch bool
		pf    printFlags
	)
	cmd := &cobra.Command{
		Use:   "get ID|NAME [--owner OWNER] [--type TYPE] [-o wide|name|jsonpath=...] [--watch]",
		Short: "Show one resource",
		Long: `Show a resource's desired args, status, client config, generations and when it was
created and last updated. -o wide prints it as the one row of list -o wide's table; -o name
prints TYPE/NAME; -o jsonpath=TEMPLATE applies the template to the -o json object.

` + refHelp + `

` + watchHelp + ` The watch ends once the resource is removed.`,
		Example: `  berth resource get 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a
  berth resource get analytics --owner acme
  berth resource get analytics --owner acme -o json | jq .config
  berth resource get analytics --owner acme -o jsonpath='{.config.host}'
  berth resource get analytics --owner acme -o wide --watch`,
		Args: idArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := opts.printerFor(cmd, pf, resourceFormats...)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return opts.withService(ctx, func(svc *domain.Service) error {
				r, err := ref.resolve(ctx, cmd, svc, args[0])
				if err != nil {
					return err
				}
				if watch {
					return watchOne(cmd, opts, svc, p, r.ID)
				}
				if p.format == outputTable {
					return writeResourceTable(cmd.OutOrStdout(), r)
				}
				return resourceListing.printOne(cmd.OutOrStdout(), p, r, opts.clock.Now())
			})
		},
	}
	ref.addFlags(cmd, opts.catalog())
	addWatchFlag(cmd, &watch)
	return cmd
}

func newResourceListCommand(opts *globalOptions) *cobra.Command {
	var (
		f                     domain.ListFilter
		typ, status, selector string
		watch                 bool
		pf                    printFlags
	)
	cmd := &cobra.Command{
		Use:   "list [--owner OWNER] [--type TYPE] [--status STATUS] [-l SELECTOR] [-o wide|name|jsonpath=...] [--sort-by PATH] [--watch]",
		Short: "List resources, oldest first",
		Long: `List resources, oldest first. The filters combine; without any every resource is listed.

-l/--selector selects by labels in Kubernetes' syntax: key=value, key!=value, key in (a,b),
key notin (a,b), key (has the label) and !key (has not), joined by commas, all of which
must hold. The status column notes what a control asks for that the status does not show
yet: "ready (paused)", "ready (hibernate requested)", "hibernated (wake requested)". AGE is
the time since the resource was created; -o wide adds REASON (why it is in its status),
UPDATED (the time since its row last changed) and LABELS, which --show-labels adds alone.

` + printHelp + `

` + watchHelp + ` It follows the resources the filters match (--limit bounds the first
listing only, --sort-by orders it), and prints a resource that stops matching them once
more, as it is then. With -o json the watch prints one object per resource, not an array.`,
		Example: `  berth resource list
  berth resource list --owner acme --type runtime -o wide
  berth resource list -l team=data,tier!=dev --show-labels
  berth resource list --status error -o json
  berth resource list -o name
  berth resource list -o jsonpath='{range [*]}{.id}{"\t"}{.config.host}{"\n"}{end}'
  berth resource list --sort-by .updated_at --no-headers
  berth resource list --owner acme --watch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := opts.printerFor(cmd, pf, resourceFormats...)
			if err != nil {
				return err
			}
			f.Type = domain.ResourceType(typ)
			f.Status = domain.Status(status)
			if f.Selector, err = parseSelectorFlag(selector); err != nil {
				return err
			}
			ctx := cmd.Context()
			return opts.withService(ctx, func(svc *domain.Service) error {
				if watch {
					return watchList(cmd, opts, svc, p, f)
				}
				rs, err := svc.List(ctx, f)
				if err != nil {
					return flagError(err)
				}
				return resourceListing.print(cmd.OutOrStdout(), p, rs, opts.clock.Now())
			})
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&f.Owner, "owner", "", "only resources of this owner")
	flags.StringVar(&typ, "type", "", "only resources of this type: "+opts.catalog().Names())
	flags.StringVar(&status, "status", "", "only resources in this status: "+domain.StatusNames())
	flags.StringVar(&f.Provisioner, "provisioner", "", "only resources pinned to this provisioner")
	flags.StringVarP(&selector, "selector", "l", "", "only resources whose labels match, e.g. team=data,tier!=dev")
	flags.IntVar(&f.Limit, "limit", 0, "list at most this many (0: all)")
	addPrintFlags(cmd, &pf, true)
	addWatchFlag(cmd, &watch)
	return cmd
}

func newResourceUpdateCommand(opts *globalOptions) *cobra.Command {
	var (
		ref             resourceRef
		argPairs, unset []string
		replace         bool
		provisioner     string
		wait            bool
		timeout         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "update ID|NAME [--arg key=value ...] [--unset key ...] [--replace] [--provisioner NAME]",
		Short: "Change a resource's args or provisioner",
		Long: `Change a resource's args. The given --arg values are MERGED into the current args (keys not
mentioned keep their values); --unset removes a key, bringing back its default. With
--replace the given --arg values become the whole args instead: the way to fix args another
program wrote that Berth cannot read. The new args are checked against the resource's type
before anything is written, and the agent reconciles the resource again when they differ
from the current ones.

--provisioner moves the resource to another provisioner: the fix for a resource created
with a provisioner no agent serves. It is allowed until provisioning starts (the resource is
pending or error, was never ready and holds no state): the move clears its failure, as
berth resource retry does, and the agent provisions it on the new provisioner at once.
Afterwards, or while the resource is being deleted, it is refused, since the old
provisioner may hold things for it: delete the resource and create it again (or, when its
provisioner is gone, forget it with berth resource delete --force). A warning names a
provisioner no live agent serves.

` + refHelp,
		Example: `  berth resource update 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a --arg slots=4
  berth resource update analytics --owner acme --unset version --wait
  berth resource update analytics --owner acme --replace --arg slots=2
  berth resource update analytics --owner acme --provisioner static --wait`,
		Args: idArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			if len(argPairs) == 0 && len(unset) == 0 && !replace && !cmd.Flags().Changed("provisioner") {
				return usageError(errors.New("nothing to update: give --arg key=value, --unset key or --provisioner NAME"))
			}
			if replace && len(unset) > 0 {
				return usageError(errors.New("--unset and --replace do not mix: --replace drops every arg not given with --arg"))
			}
			if err := checkTimeout(wait, timeout); err != nil {
				return err
			}
			ctx := cmd.Context()
			return opts.withServiceAndAgents(ctx, func(svc *domain.Service, agents domain.AgentStore) error {
				before, err := ref.resolve(ctx, cmd, svc, args[0])
				if err != nil {
					return err
				}
				set, err := opts.catalog().ParseArgFlags(before.Type, argPairs)
				if err != nil {
					return flagError(err)
				}
				r := before
				if cmd.Flags().Changed("provisioner") {
					if r, err = svc.SetProvisioner(ctx, before.ID, provisioner); err != nil {
						return flagError(storeError(err))
					}
					warnUnserved(ctx, cmd.ErrOrStderr(), agents, r.ID, r.Provisioner, wait)
				}
				switch {
				case replace:
					r, err = svc.ReplaceArgs(ctx, before.ID, set)
				case len(argPairs) > 0 || len(unset) > 0:
					r, err = svc.UpdateArgs(ctx, before.ID, set, unset)
				}
				if err != nil {
					return flagError(storeError(err))
				}
				var waitErr error
				if wait {
					// An error status recorded for the previous args or provisioner says nothing
					// about the new ones.
					staleError := before.Status == domain.StatusError && (r.Generation != before.Generation || r.Provisioner != before.Provisioner)
					r, waitErr = waitReady(cmd, opts, svc, r, staleError, timeout)
				}
				return errors.Join(printResource(cmd, format, r), waitErr)
			})
		},
	}
	flags := cmd.Flags()
	flags.StringArrayVar(&argPairs, "arg", nil, "argument to set as key=value, merged into the current args; repeat for more")
	flags.StringArrayVar(&unset, "unset", nil, "argument key to remove; repeat for more")
	flags.BoolVar(&replace, "replace", false, "make the given --arg values the whole args instead of merging them")
	flags.StringVar(&provisioner, "provisioner", "", "move the resource to this provisioner (before provisioning started only; see above)")
	addWaitFlags(cmd, &wait, &timeout, "until the resource is ready with the new args")
	ref.addFlags(cmd, opts.catalog())
	return cmd
}

func newResourceDeleteCommand(opts *globalOptions) *cobra.Command {
	var (
		ref              resourceRef
		selector, reason string
		force            bool
		wait             bool
		timeout          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "delete ID|NAME... | -l SELECTOR [--owner OWNER] [--type TYPE] [--force [--reason TEXT]]",
		Short: "Delete resources",
		Long: `Ask the agent to delete resources: each moves to deleting, the agent frees what it holds
and then removes the row. Deleting a resource that is already being deleted is fine. Give
one or more IDs or names, or -l SELECTOR (the syntax of berth resource list -l) to delete
every resource whose labels match, narrowed by --owner and --type. One line is printed per
resource; an error on one (printed to stderr) does not stop the others, and the command
fails when any did. -l matching nothing prints so and succeeds. With --wait the command
returns once the rows are gone. With -o json it prints each resource as it was when the
delete was requested: one object for one ID or name, an array otherwise.

` + forceHelp + `

` + refHelp,
		Example: `  berth resource delete 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a
  berth resource delete analytics --owner acme --wait --timeout 2m
  berth resource delete scratch1 scratch2 scratch3
  berth resource delete -l tier=dev --owner acme
  berth resource delete stranded --force --reason "provisioner nosuch never existed"`,
		Args: func(cmd *cobra.Command, args []string) error {
			return checkDeleteArgs(cmd, args, selector, force)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			if err := checkTimeout(wait, timeout); err != nil {
				return err
			}
			ctx := cmd.Context()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			return opts.withService(ctx, func(svc *domain.Service) error {
				targets, errs, err := deleteTargets(ctx, cmd, svc, &ref, args, selector)
				if err != nil {
					return err
				}
				if selector != "" && len(targets) == 0 {
					_, err := fmt.Fprintf(stderr, "No resources match -l %s%s.\n", selector, ownerText(ref.owner))
					return err
				}
				failed := errs
				var deleted []resourceJSON
				for _, target := range targets {
					var r domain.Resource
					if force {
						r, err = svc.Forget(ctx, target.ID, domain.Forgetting{By: forgetter(), Reason: reason})
					} else {
						r, err = svc.Delete(ctx, target.ID)
					}
					if err != nil {
						failed = append(failed, fmt.Errorf("resource %s (%s %q): %w", target.ID, target.Type, tableText(target.Name), storeError(err)))
						continue
					}
					msg := "delete requested: the agent frees it and then removes it"
					if force {
						msg = forgotMessage(r)
					}
					if wait && !force {
						if err := waitGone(cmd, opts, svc, r, timeout); err != nil {
							failed = append(failed, err)
							continue
						}
						msg = "deleted"
					}
					if format != outputTable {
						deleted = append(deleted, toJSON(r))
						continue
					}
					if err := writeDone(stdout, r, msg); err != nil {
						return err
					}
				}
				if format != outputTable {
					var err error
					if len(args) == 1 && selector == "" {
						if len(deleted) == 1 {
							err = writeData(stdout, format, deleted[0])
						}
					} else {
						err = writeData(stdout, format, append([]resourceJSON{}, deleted...))
					}
					if err != nil {
						return err
					}
				}
				return deleteFailures(stderr, failed, len(targets)+len(errs))
			})
		},
	}
	flags := cmd.Flags()
	flags.StringVarP(&selector, "selector", "l", "", "delete every resource whose labels match, e.g. tier=dev,team=data")
	flags.BoolVar(&force, "force", false, "remove the rows WITHOUT deprovisioning (a resource whose provisioner is gone); see above")
	flags.StringVar(&reason, "reason", "", "why the resources are forgotten, recorded in their history (with --force)")
	addWaitFlags(cmd, &wait, &timeout, "until the agent has removed the resources")
	ref.addFlags(cmd, opts.catalog())
	return cmd
}

// withService opens the database, runs fn with a Service on it and closes the database.
func (o *globalOptions) withService(ctx context.Context, fn func(*domain.Service) error) error {
	st, err := o.openState(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	return needsSchema(fn(domain.NewService(st, o.catalog())))
}

func printResource(cmd *cobra.Command, format string, r domain.Resource) error {
	if format != outputTable {
		return writeData(cmd.OutOrStdout(), format, toJSON(r))
	}
	return writeResourceTable(cmd.OutOrStdout(), r)
}

func idArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
		return usageError(fmt.Errorf("%s needs exactly one resource ID or name, got %d arguments (see `berth resource list` for IDs and names)", cmd.CommandPath(), len(args)))
	}
	return nil
}

// parseTypeFlag returns the type --type names, one that types serves.
func parseTypeFlag(types *environ.Catalog, typ string) (domain.ResourceType, error) {
	if typ == "" {
		return "", usageError(fmt.Errorf("--type is required: use one of %s", types.Names()))
	}
	t := domain.ResourceType(typ)
	if _, err := types.Lookup(t); err != nil {
		return "", usageError(fmt.Errorf("--type: %q is not a resource type: use one of %s", typ, types.Names()))
	}
	return t, nil
}

// flagError rewords a *domain.FieldError to name the flag the user typed.
func flagError(err error) error {
	var fe *domain.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	var flag string
	switch {
	case strings.HasPrefix(fe.Field, "args."):
		flag = "--arg " + strings.TrimPrefix(fe.Field, "args.")
	case strings.HasPrefix(fe.Field, "--"):
		flag = fe.Field
	case fe.Field == "id":
		flag = "ID"
	case fe.Field == "labels":
		flag = "--label"
	default:
		flag = "--" + fe.Field
	}
	return &rewordedError{msg: flag + ": " + fe.Msg, err: err}
}

// storeError says what to do about the store's sentinel errors.
func storeError(err error) error {
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return fmt.Errorf("%w: see `berth resource list` for IDs and names", err)
	default:
		return flagError(err)
	}
}

func ownerText(owner string) string {
	if owner == "" {
		return ""
	}
	return fmt.Sprintf(" for owner %q", owner)
}

func orNone(msg string) string {
	if msg == "" {
		return "no message"
	}
	return msg
}
