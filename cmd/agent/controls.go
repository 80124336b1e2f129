package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/berth-dev/berth/domain"
)

// control is one of the lifecycle controls of a single resource (pause, resume, hibernate,
// wake): a store write through the Service and the line that says what it did.
type control struct {
	name, short, long, example string
	apply                      func(svc *domain.Service, ctx context.Context, id string) (domain.Resource, error)
	// done says in one line what the control did to before, leaving after, and what to
	// expect next.
	done func(before, after domain.Resource) string
	// goal is where --wait waits for the control to take the resource, after as the control
	// left it; nil for a control that takes no --wait. reached says so once it is there.
	goal    func(after domain.Resource) waitGoal
	reached func(r domain.Resource) string
}

// controls are the single-resource controls, in the order help lists them.
var controls = []control{
	{
		name:  "pause",
		short: "Pause a resource: the agent leaves it alone until it is resumed",
		long: `Pause a resource: the agent does nothing to it (no reconcile, no health check or repair,
not even a delete, which is carried out on resume) until ` + "`berth resource resume`" + `. Changes
made meanwhile (args, labels, hibernate or wake, delete) are recorded and applied on resume.
Pausing a paused resource changes nothing.`,
		example: "  berth resource pause analytics --owner acme",
		apply:   (*domain.Service).Pause,
		done: func(before, after domain.Resource) string {
			what := "paused"
			if before.Paused {
				what = "already paused"
			}
			return fmt.Sprintf("%s: the agent leaves it alone until `berth resource resume %s`", what, after.ID)
		},
	},
	{
		name:  "resume",
		short: "Resume a paused resource",
		long: `Resume a paused resource: the agent takes it at once and applies what changed while it
was paused. Resuming a resource that is not paused changes nothing.`,
		example: "  berth resource resume analytics --owner acme",
		apply:   (*domain.Service).Resume,
		done: func(before, after domain.Resource) string {
			if !before.Paused {
				return "not paused: nothing to resume, the agent is already looking after it"
			}
			return "resumed: the agent takes it at once and applies any change made while it was paused"
		},
	},
	{
		name:  "hibernate",
		short: "Stop a resource keeping its data, until it is woken",
		long: `Ask the agent to hibernate a resource: its environ stops it while keeping its data and
identity (Kubernetes scales its workload to zero and keeps its volume, Service and Secret;
static frees its slots and remembers its host). The resource is hibernating while it does,
then hibernated: it holds no capacity and is not health-checked until ` + "`berth resource wake`" + `.
An environ that cannot hibernate puts the resource in error, saying so. A resource being
deleted cannot be hibernated.`,
		example: "  berth resource hibernate analytics --owner acme\n  berth resource hibernate analytics --owner acme --wait --timeout 2m",
		apply:   (*domain.Service).Hibernate,
		goal:    func(after domain.Resource) waitGoal { return hibernatedGoal(after.UpdatedAt) },
		reached: func(r domain.Resource) string {
			return fmt.Sprintf("hibernated: it holds no capacity; `berth resource wake %s` brings it back", r.ID)
		},
		done: func(before, after domain.Resource) string {
			switch {
			case after.Status == domain.StatusHibernated:
				return fmt.Sprintf("already hibernated: `berth resource wake %s` brings it back", after.ID)
			case before.Hibernate:
				return "hibernate already requested: it shows hibernated once the agent has stopped it" + pausedNote(after)
			}
			return fmt.Sprintf("hibernate requested: the agent stops it keeping its data; it shows hibernated when done, and `berth resource wake %s` brings it back%s",
				after.ID, pausedNote(after))
		},
	},
	{
		name:  "wake",
		short: "Bring a hibernated resource back",
		long: `Ask the agent to wake a hibernated (or hibernating) resource: it is provisioned again
from what it kept (on the host it had, where there is room), with any args changed while it
slept, and is ready when done. Waking a resource that is not hibernated changes nothing; a
resource being deleted cannot be woken.`,
		example: "  berth resource wake analytics --owner acme\n  berth resource wake analytics --owner acme --wait --timeout 5m --quiet",
		apply:   (*domain.Service).Wake,
		goal:    func(after domain.Resource) waitGoal { return wokenGoal(after.UpdatedAt) },
		reached: func(domain.Resource) string { return "ready: woken with its data" },
		done: func(before, after domain.Resource) string {
			sleeping := after.Status == domain.StatusHibernated || after.Status == domain.StatusHibernating
			switch {
			case !before.Hibernate && !sleeping:
				return "not hibernated: nothing to wake"
			case !before.Hibernate:
				return "wake already requested: it shows ready once the agent has brought it back" + pausedNote(after)
			}
			return "wake requested: the agent brings it back with its data; it shows ready when done" + pausedNote(after)
		},
	},
}

func newControlCommands(opts *globalOptions) []*cobra.Command {
	cmds := make([]*cobra.Command, 0, len(controls)+2)
	for _, c := range controls {
		cmds = append(cmds, newControlCommand(opts, c))
	}
	return append(cmds, newResourceRetryCommand(opts), newResourceLabelCommand(opts))
}

func newControlCommand(opts *globalOptions, c control) *cobra.Command {
	var (
		ref     resourceRef
		wait    bool
		timeout time.Duration
	)
	long := c.long + "\n\nThe control is recorded in the resource's history (berth resource events, kind control).\nWith -o json the command prints the resource as the control left it"
	if c.goal != nil {
		long += " (with --wait, as the wait left it).\n\n" + waitHelp
	} else {
		long += "."
	}
	cmd := &cobra.Command{
		Use:     c.name + " ID|NAME [--owner OWNER] [--type TYPE]",
		Short:   c.short,
		Long:    long + "\n\n" + refHelp,
		Example: c.example + "\n  berth resource " + c.name + " 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a -o json",
		Args:    idArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			if err := checkTimeout(wait, timeout); err != nil {
				return err
			}
			ctx := cmd.Context()
			return opts.withService(ctx, func(svc *domain.Service) error {
				before, err := ref.resolve(ctx, cmd, svc, args[0])
				if err != nil {
					return err
				}
				after, err := c.apply(svc, ctx, before.ID)
				if err != nil {
					return storeError(err)
				}
				msg := c.done(before, after)
				var waitErr error
				if wait {
					if after, waitErr = waitFor(cmd, opts, svc, after, c.goal(after), timeout); waitErr == nil {
						msg = c.reached(after)
					}
				}
				if format != outputTable {
					return errors.Join(writeData(cmd.OutOrStdout(), format, toJSON(after)), waitErr)
				}
				return errors.Join(writeDone(cmd.OutOrStdout(), after, msg), waitErr)
			})
		},
	}
	if c.goal != nil {
		addWaitFlags(cmd, &wait, &timeout, "until the agent has carried the control out")
	}
	ref.addFlags(cmd, opts.catalog())
	return cmd
}

func newResourceRetryCommand(opts *globalOptions) *cobra.Command {
	var (
		ref       resourceRef
		allFailed bool
		selector  string
		wait      bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "retry ID|NAME | --all-failed [-l SELECTOR] | -l SELECTOR",
		Short: "Reconcile a resource now: clear its backoff or permanent failure",
		Long: `Ask the agent to reconcile a resource at once: its failed attempts, backoff and last error
are cleared, so a resource backing off is tried now and one that failed for good at its
generation is tried again. A paused resource is retried when it is resumed.

--all-failed retries every resource in error or backing off (a failed attempt, or a retry
scheduled, waits for capacity included); -l retries every resource its labels select, and
narrows --all-failed. Each retry is recorded in the resource's history (kind control). With
-o json the command prints the resource (for --all-failed and -l, an array of them).

--wait (one resource only) waits for the outcome of the retry: the resource ready at its
generation (hibernated when a hibernate is asked for, gone when it is being deleted), or
the first attempt after the retry failing, which ends the wait with exit code 1 even when
the agent will try again. ` + waitHelp + `

` + refHelp,
		Example: `  berth resource retry analytics --owner acme
  berth resource retry analytics --owner acme --wait --timeout 5m
  berth resource retry --all-failed
  berth resource retry --all-failed -l team=data
  berth resource retry -l 'tier in (dev,test)'`,
		Args: func(cmd *cobra.Command, args []string) error {
			bulk := allFailed || cmd.Flags().Changed("selector")
			switch {
			case len(args) > 1:
				return usageError(fmt.Errorf("%s takes one resource ID or name, got %d arguments; for several use --all-failed or -l SELECTOR", cmd.CommandPath(), len(args)))
			case len(args) == 1 && bulk:
				return usageError(fmt.Errorf("%s: give a resource ID or name, or --all-failed / -l SELECTOR, not both", cmd.CommandPath()))
			case bulk && wait:
				return usageError(fmt.Errorf("%s: --wait waits for one resource: give its ID or name instead of --all-failed / -l SELECTOR", cmd.CommandPath()))
			case len(args) == 0 && !bulk:
				return usageError(fmt.Errorf("%s needs a resource: give its ID or name, --all-failed (every resource in error or backing off) or -l SELECTOR (e.g. -l team=data)", cmd.CommandPath()))
			case len(args) == 1:
				return idArg(cmd, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			if err := checkTimeout(wait, timeout); err != nil {
				return err
			}
			var sel labels.Selector
			if len(args) == 0 {
				if sel, err = parseSelectorFlag(selector); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			return opts.withService(ctx, func(svc *domain.Service) error {
				if len(args) == 1 {
					r, err := ref.resolve(ctx, cmd, svc, args[0])
					if err != nil {
						return err
					}
					if r, err = svc.Retry(ctx, r.ID); err != nil {
						return storeError(err)
					}
					msg := retryDone(r)
					var waitErr error
					if wait {
						goal := retriedGoal(r)
						if r, waitErr = waitFor(cmd, opts, svc, r, goal, timeout); waitErr == nil {
							msg = "retried: it is " + goal.what
						}
					}
					if format != outputTable {
						return errors.Join(writeData(cmd.OutOrStdout(), format, toJSON(r)), waitErr)
					}
					return errors.Join(writeDone(cmd.OutOrStdout(), r, msg), waitErr)
				}
				return retryAll(ctx, cmd.OutOrStdout(), svc, format, sel, allFailed)
			})
		},
	}
	cmd.Flags().BoolVar(&allFailed, "all-failed", false, "retry every resource in error or backing off")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "retry every resource whose labels match, e.g. team=data,tier!=dev")
	addWaitFlags(cmd, &wait, &timeout, "for the outcome of the retry (one resource only)")
	ref.addFlags(cmd, opts.catalog())
	return cmd
}

// retryAll retries every resource sel selects (only the failed ones with onlyFailed),
// printing a line (or, with -o json, the resource) for each. A resource it cannot retry
// (deleted meanwhile) does not stop the others; the errors are returned together.
func retryAll(ctx context.Context, w io.Writer, svc *domain.Service, format string, sel labels.Selector, onlyFailed bool) error {
	rs, err := svc.List(ctx, domain.ListFilter{Selector: sel})
	if err != nil {
		return flagError(err)
	}
	var (
		retried []domain.Resource
		errs    []error
	)
	for _, r := range rs {
		if onlyFailed && !failed(r) {
			continue
		}
		after, err := svc.Retry(ctx, r.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("retry resource %s: %w", r.ID, err))
			continue
		}
		retried = append(retried, after)
	}
	if format != outputTable {
		out := make([]resourceJSON, len(retried))
		for i, r := range retried {
			out[i] = toJSON(r)
		}
		return errors.Join(writeData(w, format, out), errors.Join(errs...))
	}
	if len(retried) == 0 && len(errs) == 0 {
		what := "no resource matches the selector"
		if onlyFailed {
			what = "no resource is in error or backing off"
			if sel != nil && !sel.Empty() {
				what += " among those the selector matches"
			}
		}
		_, err := fmt.Fprintf(w, "nothing to retry: %s\n", what)
		return err
	}
	for _, r := range retried {
		if err := writeDone(w, r, retryDone(r)); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// failed reports whether r is in error or backing off: a failed attempt, or a retry
// scheduled (a wait for capacity included).
func failed(r domain.Resource) bool {
	return r.Status == domain.StatusError || r.LastError != "" || r.NextAttemptAt != nil
}

func retryDone(r domain.Resource) string {
	return "retry requested: backoff and last error cleared, the agent reconciles it at once" + pausedNote(r)
}

func newResourceLabelCommand(opts *globalOptions) *cobra.Command {
	var ref resourceRef
	cmd := &cobra.Command{
		Use:   "label ID|NAME KEY=VALUE ... KEY- ...",
		Short: "Set or remove a resource's labels",
		Long: `Set labels (KEY=VALUE; an existing key gets the new value) and remove them (KEY-, as
kubectl does) on a resource; the other labels stay. A key is a plain name (at most 63
letters, digits, '-', '_' or '.', starting and ending with a letter or digit; no prefix),
a value the same or empty. Removing a label the resource does not have is an error.

A change of labels bumps the resource's generation, so the agent reconciles it (the
Kubernetes environ relabels the objects it made, under label.berth.dev/KEY), and is recorded
in its history (kind control). ` + "`berth resource list -l SELECTOR`" + ` selects by labels. With -o json
the command prints the resource as relabelled.

` + refHelp,
		Example: `  berth resource label analytics --owner acme team=data tier=prod
  berth resource label 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a tier-`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError(fmt.Errorf("%s needs a resource ID or name and at least one label: KEY=VALUE to set it, KEY- to remove it (e.g. team=data tier-)", cmd.CommandPath()))
			}
			return idArg(cmd, args[:1])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			set, unset, err := parseLabelArgs(args[1:])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return opts.withService(ctx, func(svc *domain.Service) error {
				before, err := ref.resolve(ctx, cmd, svc, args[0])
				if err != nil {
					return err
				}
				after, err := svc.Label(ctx, before.ID, set, unset)
				if err != nil {
					return labelError(storeError(err))
				}
				if format != outputTable {
					return writeData(cmd.OutOrStdout(), format, toJSON(after))
				}
				msg := "labels unchanged: " + labelText(after.Labels)
				if after.Generation != before.Generation {
					msg = fmt.Sprintf("labels now %s (generation %d): the agent relabels what it made for it%s",
						labelText(after.Labels), after.Generation, pausedNote(after))
				}
				return writeDone(cmd.OutOrStdout(), after, msg)
			})
		},
	}
	ref.addFlags(cmd, opts.catalog())
	return cmd
}

// parseLabelArgs splits the label command's arguments into labels to set (KEY=VALUE) and
// keys to remove (KEY-).
func parseLabelArgs(args []string) (map[string]string, []string, error) {
	set := map[string]string{}
	var unset []string
	for _, arg := range args {
		if key, ok := strings.CutSuffix(arg, "-"); ok && !strings.Contains(arg, "=") {
			if key == "" {
				return nil, nil, fmt.Errorf("label %q: write KEY- to remove the label KEY (e.g. tier-)", arg)
			}
			if slices.Contains(unset, key) {
				return nil, nil, fmt.Errorf("label %q: %s is removed twice: give it once", arg, key)
			}
			unset = append(unset, key)
			continue
		}
		key, value, ok := strings.Cut(arg, "=")
		if !ok || key == "" {
			return nil, nil, fmt.Errorf("label %q: write KEY=VALUE to set a label or KEY- to remove it (e.g. team=data, tier-)", arg)
		}
		if _, dup := set[key]; dup {
			return nil, nil, fmt.Errorf("label %q: %s is set twice: give it once", arg, key)
		}
		set[key] = value
	}
	return set, unset, nil
}

// parseLabelFlags parses the repeatable --label KEY=VALUE of create.
func parseLabelFlags(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range pairs {
		key, value, ok := strings.Cut(pair, "=")
		if !ok || key == "" {
			return nil, usageError(fmt.Errorf("--label: %q is not KEY=VALUE: write e.g. --label team=data (repeat the flag for more)", pair))
		}
		if _, dup := out[key]; dup {
			return nil, usageError(fmt.Errorf("--label: %s is given twice: give each key once", key))
		}
		out[key] = value
	}
	return out, nil
}

// labelError names the label arguments in a labels error of the Service.
func labelError(err error) error {
	var fe *domain.FieldError
	if !errors.As(err, &fe) || fe.Field != "labels" {
		return err
	}
	return &rewordedError{msg: "labels: " + fe.Msg, err: err}
}

// parseSelectorFlag parses -l/--selector ("" selects everything).
func parseSelectorFlag(s string) (labels.Selector, error) {
	sel, err := domain.ParseSelector(s)
	var fe *domain.FieldError
	if errors.As(err, &fe) {
		return nil, &rewordedError{msg: fmt.Sprintf("-l/--selector %q: %s", s, fe.Msg), err: err}
	}
	return sel, err
}

// writeDone prints what a control did to r, in one line.
func writeDone(w io.Writer, r domain.Resource, msg string) error {
	_, err := fmt.Fprintf(w, "resource %s (%s %q): %s\n", r.ID, r.Type, tableText(r.Name), msg)
	return err
}

// pausedNote reminds that nothing happens to a paused resource until it is resumed.
func pausedNote(r domain.Resource) string {
	if !r.Paused {
		return ""
	}
	return fmt.Sprintf(" (it is paused: nothing happens until `berth resource resume %s`)", r.ID)
}

// statusText is r's status with what its controls ask for that the status does not show
// yet: "ready (paused)", "ready (hibernate requested)", "hibernated (wake requested)".
func statusText(r domain.Resource) string {
	var notes []string
	if r.Paused {
		notes = append(notes, "paused")
	}
	sleeping := r.Status == domain.StatusHibernated || r.Status == domain.StatusHibernating
	switch {
	case r.Hibernate && !sleeping && r.Status != domain.StatusDeleting:
		notes = append(notes, "hibernate requested")
	case !r.Hibernate && sleeping:
		notes = append(notes, "wake requested")
	}
	if len(notes) == 0 {
		return string(r.Status)
	}
	return fmt.Sprintf("%s (%s)", r.Status, strings.Join(notes, ", "))
}

// labelText renders labels as sorted key=value pairs joined by commas, "none" when empty.
func labelText(l map[string]string) string {
	if len(l) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ", ")
}
