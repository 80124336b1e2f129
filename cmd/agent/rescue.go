package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
)

// forceHelp explains delete --force in its help.
const forceHelp = `--force forgets the resource instead: the row is removed at once WITHOUT deprovisioning,
whatever its status. It is the way out for a resource whose provisioner is gone (a delete
that can never finish): what the provisioner made for it (containers, volumes, objects,
slots on its hosts) may be left behind, for you to remove; a provisioner still in an agent's
set frees what its orphan sweep finds. The resource's history records who forgot it (your
user name, and on PostgreSQL the database role), --reason, its status and provisioner, and
the keys of its state and config (never their values). --force is refused while a live
agent holds the resource's lease (it may be provisioning or deprovisioning it that moment:
forgetting it then could leak what it makes); pause the resource or wait for the lease to
end, and try again. It takes IDs or names, not -l, so that a selector never forgets more
than you named. On PostgreSQL only the agent's role (the owner of Berth's tables) may
force a delete: a client role requests the delete only.`

// withServiceAndAgents is withService with the store's agents as well, for the commands
// that check which provisioners the live agents serve.
func (o *globalOptions) withServiceAndAgents(ctx context.Context, fn func(*domain.Service, domain.AgentStore) error) error {
	st, err := o.openState(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	return needsSchema(fn(domain.NewService(st, o.catalog()), st))
}

// warnUnserved writes a warning to w when no live agent serves provisioner (a named one; ""
// is the agents' default, which any live agent serves), or no agent is live at all, naming
// what the live agents serve and the fix. It stays silent when it cannot tell: the agents
// cannot be listed, or a live agent's build does not report its provisioners, and leaves
// "no agent is live" to a --wait that follows (waiting), which says it as its first note.
func warnUnserved(ctx context.Context, w io.Writer, agents domain.AgentStore, id, provisioner string, waiting bool) {
	listed, err := agents.ListAgents(ctx, defaultAgentTTL)
	if err != nil {
		return
	}
	var live []domain.Agent
	for _, a := range listed {
		if a.Live {
			live = append(live, a)
		}
	}
	if len(live) == 0 {
		if waiting {
			return
		}
		fmt.Fprintf(w, "warning: no agent is live, so nothing reconciles resource %s until one runs: start `berth run` (see `berth agents`)\n", id)
		return
	}
	if provisioner == "" {
		return
	}
	var served []string
	for _, a := range live {
		if len(a.Provisioners) == 0 {
			return
		}
		if slices.Contains(a.Provisioners, provisioner) {
			return
		}
		served = append(served, a.Provisioners...)
	}
	slices.Sort(served)
	fmt.Fprintf(w, "warning: no live agent serves provisioner %q (they serve: %s), so resource %s fails: move it with `berth resource update %s --provisioner NAME`, or add %q to an agent's provisioner set\n",
		provisioner, strings.Join(slices.Compact(served), ", "), id, id, provisioner)
}

// forgetter names the operating-system user running the command, for the history event of
// a forced delete.
func forgetter() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// forgotMessage is the line delete --force prints for r.
func forgotMessage(r domain.Resource) string {
	provisioner := "the default provisioner"
	if r.Provisioner != "" {
		provisioner = fmt.Sprintf("provisioner %q", r.Provisioner)
	}
	return fmt.Sprintf("forgotten without deprovisioning (it was %s): what %s made for it may be left behind; see `berth resource events %s`",
		r.Status, provisioner, r.ID)
}

// deleteTargets resolves the resources delete acts on: each of names (its errors, one per
// name that resolves to none, in errs), or those the selector matches among --owner and
// --type.
func deleteTargets(ctx context.Context, cmd *cobra.Command, svc *domain.Service, ref *resourceRef, names []string, selector string) (targets []domain.Resource, errs []error, err error) {
	if selector == "" {
		for _, name := range names {
			r, err := ref.resolve(ctx, cmd, svc, name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			targets = append(targets, r)
		}
		return targets, errs, nil
	}
	sel, err := parseSelectorFlag(selector)
	if err != nil {
		return nil, nil, err
	}
	f := domain.ListFilter{Owner: ref.owner, Selector: sel}
	if ref.typ != "" {
		if f.Type, err = parseTypeFlag(ref.types, ref.typ); err != nil {
			return nil, nil, err
		}
	}
	targets, err = svc.List(ctx, f)
	return targets, nil, flagError(err)
}

// checkDeleteArgs checks delete's arguments and flags before anything is read.
func checkDeleteArgs(cmd *cobra.Command, args []string, selector string, force bool) error {
	switch {
	case selector == "" && len(args) == 0:
		return fmt.Errorf("%s needs resource IDs or names, or -l SELECTOR (see `berth resource list` for IDs and names)", cmd.CommandPath())
	case selector != "" && len(args) > 0:
		return usageError(fmt.Errorf("-l/--selector: give either IDs and names or -l, not both (got %d arguments)", len(args)))
	case force && selector != "":
		return usageError(fmt.Errorf("--force takes IDs or names, not -l: name each resource to forget (see `berth resource list -l %s`)", selector))
	case cmd.Flags().Changed("reason") && !force:
		return usageError(fmt.Errorf("--reason is recorded with --force only: add --force, or leave --reason out"))
	case force && cmd.Flags().Changed("wait"):
		return usageError(fmt.Errorf("--wait has nothing to wait for with --force: the row is removed at once"))
	}
	for _, a := range args {
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("%s: an empty resource ID or name: give each resource's ID or name", cmd.CommandPath())
		}
	}
	return nil
}

// deleteFailures is delete's outcome when failed of its total resources failed: the one
// error itself when it acted on one resource; otherwise each is written to w and the
// error counts them, so that one failure does not hide the others.
func deleteFailures(w io.Writer, failed []error, total int) error {
	switch {
	case len(failed) == 0:
		return nil
	case total == 1:
		return failed[0]
	}
	for _, err := range failed {
		fmt.Fprintf(w, "berth: %v\n", err)
	}
	return fmt.Errorf("%d of %d deletes failed (each is named above)", len(failed), total)
}
