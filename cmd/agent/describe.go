package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/berth-dev/berth/domain"
)

// describeEventLimit is how many of a resource's newest events describe reads (and folds).
const describeEventLimit = 50

// conditionJSON is a condition as -o json prints it, in Kubernetes' shape.
type conditionJSON struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	ObservedGeneration int64     `json:"observedGeneration"`
}

// conditionList is a resource's conditions in -o json.
type conditionList []conditionJSON

func toConditionsJSON(r domain.Resource) conditionList {
	conds := domain.Conditions(r)
	out := make(conditionList, len(conds))
	for i, c := range conds {
		out[i] = conditionJSON{
			Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			LastTransitionTime: c.LastTransitionTime.UTC(), ObservedGeneration: c.ObservedGeneration,
		}
	}
	return out
}

// labelsJSON is a resource's labels in -o json: an object, {} when there are none.
type labelsJSON map[string]string

func toLabelsJSON(l map[string]string) labelsJSON {
	if l == nil {
		return labelsJSON{}
	}
	return labelsJSON(l)
}

func newResourceDescribeCommand(opts *globalOptions) *cobra.Command {
	var ref resourceRef
	cmd := &cobra.Command{
		Use:   "describe ID|NAME [--owner OWNER] [--type TYPE]",
		Short: "Show a resource in detail: why it is where it is, and what comes next",
		Long: `Show everything about a resource in one page of text, as kubectl describe does: its spec
(type, name, owner, provisioner, labels, args, generations), status and message, its Ready
and Synced conditions, its failed attempts and last error, when the agent tries it next and
why (backing off until T, waiting for capacity since T, paused, hibernated, or failed for
good until its args change or it is retried), which agent holds its reconcile lease and
until when, when a retry was last asked for, and its recent history (the newest
` + fmt.Sprint(describeEventLimit) + ` events), with repeats folded into one line: "(x4 over 3m)" is the same event four
times, the first 3 minutes ago. Its client config is left out (berth resource get shows it).

The output is for people; scripts read berth resource get -o json (conditions included) and
berth resource events -o json.

` + refHelp,
		Example: `  berth resource describe analytics --owner acme
  berth resource describe 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a`,
		Args: idArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.output != outputTable {
				return usageError(fmt.Errorf("-o/--output: describe prints text only: use `berth resource get %s -o %s` and `berth resource events %s -o %s`",
					args[0], opts.output, args[0], opts.output))
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			r, err := ref.resolve(ctx, cmd, domain.NewService(st, opts.catalog()), args[0])
			if err != nil {
				return needsSchema(err)
			}
			events, err := st.ListEvents(ctx, r.ID, describeEventLimit)
			if err != nil {
				return needsSchema(storeError(err))
			}
			return writeDescription(cmd.OutOrStdout(), r, events, opts.clock.Now())
		},
	}
	ref.addFlags(cmd, opts.catalog())
	return cmd
}

// writeDescription prints r, its conditions and its folded events as of now.
func writeDescription(w io.Writer, r domain.Resource, events []domain.Event, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, tableText(value)) }
	provisioner := r.Provisioner
	if provisioner == "" {
		provisioner = "<the agent's default, not yet chosen>"
	}
	field("Name", r.Name)
	field("ID", r.ID)
	field("Type", string(r.Type))
	field("Owner", orAngle(r.Owner, "none"))
	field("Provisioner", provisioner)
	keys := slices.Sorted(maps.Keys(r.Labels))
	if len(keys) == 0 {
		field("Labels", "<none>")
	}
	for i, k := range keys {
		if i == 0 {
			field("Labels", k+"="+r.Labels[k])
		} else {
			fmt.Fprintf(tw, "\t%s\n", tableText(k+"="+r.Labels[k]))
		}
	}
	field("Args", orAngle(formatMap(r.Args), "none"))
	field("Generation", fmt.Sprintf("%d (observed %d)", r.Generation, r.ObservedGeneration))
	field("Created", since(r.CreatedAt, now))
	field("Status", statusText(r))
	field("Reason", orAngle(string(r.Reason), "none"))
	field("Message", orAngle(r.StatusMessage, "none"))
	field("Status since", since(r.StatusChangedAt, now))
	if r.WaitingSince != nil {
		field("Waiting since", since(*r.WaitingSince, now))
	}
	lastAttempt := "<never>"
	if r.LastAttemptAt != nil {
		lastAttempt = since(*r.LastAttemptAt, now)
	}
	field("Last attempt", lastAttempt)
	field("Paused", yesNo(r.Paused))
	field("Hibernate", hibernateText(r))
	if !r.Readable() {
		field("Unreadable", r.UnreadableReason())
	}
	field("Attempts", fmt.Sprintf("%d failed since the last success or change", r.Attempts))
	field("Last error", orAngle(r.LastError, "none"))
	field("Next attempt", nextAttempt(r, now))
	field("Lease", leaseText(r, now))
	retry := "<never>"
	if r.RetryRequestedAt != nil {
		retry = since(*r.RetryRequestedAt, now)
	}
	field("Retry requested", retry)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "Conditions:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tOBSERVED GEN\tLAST TRANSITION\tMESSAGE")
	for _, c := range domain.Conditions(r) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", c.Type, c.Status, c.Reason, c.ObservedGeneration,
			age(c.LastTransitionTime, now)+" ago", tableText(orDash(c.Message)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "Events: <none>")
		return err
	}
	if len(events) == describeEventLimit {
		fmt.Fprintf(w, "Events (the newest %d, oldest first; older ones: berth resource events %s --limit N):\n", len(events), r.ID)
	} else {
		fmt.Fprintln(w, "Events (oldest first):")
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGE\tKIND\tSTATUS\tMESSAGE")
	for _, e := range foldEvents(events) {
		seen := age(e.last, now)
		if e.count > 1 {
			seen += fmt.Sprintf(" (x%d over %s)", e.count, age(e.first, now))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", seen, e.kind, e.status, tableText(e.message))
	}
	return tw.Flush()
}

// foldedEvent is a run of consecutive events with the same kind, status and message.
type foldedEvent struct {
	kind        domain.EventKind
	status      domain.Status
	message     string
	count       int
	first, last time.Time
}

// foldEvents folds runs of consecutive equal events (kind, status and message) into one,
// as kubectl folds repeated events.
func foldEvents(events []domain.Event) []foldedEvent {
	var out []foldedEvent
	for _, e := range events {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			if prev.kind == e.Kind && prev.status == e.Status && prev.message == e.Message {
				prev.count++
				prev.last = e.At
				continue
			}
		}
		out = append(out, foldedEvent{kind: e.Kind, status: e.Status, message: e.Message, count: 1, first: e.At, last: e.At})
	}
	return out
}

// nextAttempt says when the agent next works on r, and why then.
func nextAttempt(r domain.Resource, now time.Time) string {
	sleeping := r.Status == domain.StatusHibernated || r.Status == domain.StatusHibernating
	switch {
	case r.Paused:
		return fmt.Sprintf("none while paused: the agent leaves it alone until `berth resource resume %s`", r.ID)
	case r.Status == domain.StatusDeleting && r.NextAttemptAt != nil:
		return fmt.Sprintf("deprovision retried %s, after %d failed attempt(s)", whenAt(*r.NextAttemptAt, now), r.Attempts)
	case r.Status == domain.StatusDeleting:
		return "now: the agent frees what it holds and removes it"
	case r.Hibernate && r.Status == domain.StatusHibernated:
		return fmt.Sprintf("none while hibernated: `berth resource wake %s` brings it back", r.ID)
	}
	if r.Status == domain.StatusReady && r.Reason == domain.ReasonResizeWaitingForCapacity {
		next := "when room frees"
		if r.NextAttemptAt != nil {
			next = fmt.Sprintf("tried again %s, or sooner when room frees", whenAt(*r.NextAttemptAt, now))
		}
		return fmt.Sprintf("serving generation %d while generation %d waits for capacity: %s", r.ObservedGeneration, r.Generation, next)
	}
	if r.Reason == domain.ReasonQuotaExceeded && (r.Status == domain.StatusPending || r.Status == domain.StatusReady) {
		return quotaWait(r, now)
	}
	if r.Status == domain.StatusPending && r.Reason == domain.ReasonWaitingForCapacity {
		next := "when room frees"
		if r.NextAttemptAt != nil {
			next = fmt.Sprintf("tried again %s, or sooner when room frees on its provisioner", whenAt(*r.NextAttemptAt, now))
		}
		if r.WaitingSince == nil {
			return "waiting for capacity: " + next
		}
		return fmt.Sprintf("waiting for capacity since %s: %s", since(*r.WaitingSince, now), next)
	}
	if r.Reason == domain.ReasonBrokerUnavailable {
		next := "when a probe finds its broker back"
		if r.NextAttemptAt != nil {
			next = fmt.Sprintf("at the breaker's next probe, %s", whenAt(*r.NextAttemptAt, now))
		}
		return fmt.Sprintf("waits for its provisioner's broker, whose circuit breaker is open (`berth capacity`)%s: %s", sinceText(r, now), next)
	}
	switch {
	case r.NextAttemptAt != nil && r.NextAttemptAt.After(now):
		return fmt.Sprintf("backoff until %s, after %d failed attempt(s); `berth resource retry %s` tries it now",
			when(*r.NextAttemptAt, now), r.Attempts, r.ID)
	case r.NextAttemptAt != nil:
		return fmt.Sprintf("due since %s: an agent takes it on its next pass", when(*r.NextAttemptAt, now))
	case r.Status == domain.StatusError && r.Reason == domain.ReasonNeverFits:
		return fmt.Sprintf("none: failed for good at generation %d, since it can never fit its provisioner; ask for less (`berth resource update %s --arg ...`) or grow the provisioner set (it is retried then)",
			r.Generation, r.ID)
	case r.Status == domain.StatusError && r.LastError != "":
		return fmt.Sprintf("none: failed for good at generation %d; waiting for new args (`berth resource update %s`) or `berth resource retry %s`; "+
			"if its provisioner is gone, move it (`berth resource update %s --provisioner NAME`) or forget it (`berth resource delete %s --force`)",
			r.Generation, r.ID, r.ID, r.ID, r.ID)
	case r.Status == domain.StatusError:
		return fmt.Sprintf("none scheduled: the agent looks at it again when its row changes, or on `berth resource retry %s`", r.ID)
	case r.Hibernate:
		return "now: the agent hibernates it"
	case sleeping:
		return "now: the agent wakes it"
	case r.UpToDate():
		return fmt.Sprintf("none: provisioned at generation %d (health checks go on)", r.Generation)
	}
	if r.Status == domain.StatusPending && r.Reason == domain.ReasonCreated {
		return fmt.Sprintf("now: queued for its owner's turn (agents serve owners in turn, by weight: `berth owners`); an agent brings it to generation %d when it takes the row", r.Generation)
	}
	return fmt.Sprintf("now: an agent brings it to generation %d when it takes the row", r.Generation)
}

// sinceText is " since <when>" for a resource that keeps the time its wait began, else "".
func sinceText(r domain.Resource, now time.Time) string {
	if r.WaitingSince == nil {
		return ""
	}
	return " since " + since(*r.WaitingSince, now)
}

// quotaWait is the next attempt of r, which waits for its owner's quota on its provisioner.
func quotaWait(r domain.Resource, now time.Time) string {
	what := "waiting for quota"
	if r.Status == domain.StatusReady {
		what = fmt.Sprintf("serving generation %d while generation %d waits for quota", r.ObservedGeneration, r.Generation)
	}
	if r.WaitingSince != nil {
		what += " since " + since(*r.WaitingSince, now)
	}
	next := "when its owner's usage drops or the quota rises"
	if r.NextAttemptAt != nil {
		next = fmt.Sprintf("tried again %s, or sooner when its owner's usage drops or the quota rises", whenAt(*r.NextAttemptAt, now))
	}
	return fmt.Sprintf("%s: %s (`berth quota get %q --provisioner %q` shows the quota)", what, next, r.Owner, r.Provisioner)
}

func leaseText(r domain.Resource, now time.Time) string {
	switch {
	case r.LeaseHolder == "":
		return "<none>"
	case r.LeaseExpiresAt == nil:
		return "last held by " + r.LeaseHolder
	case r.LeaseExpiresAt.After(now):
		return fmt.Sprintf("held by %s until %s", r.LeaseHolder, when(*r.LeaseExpiresAt, now))
	}
	return fmt.Sprintf("last held by %s, expired %s", r.LeaseHolder, when(*r.LeaseExpiresAt, now))
}

func hibernateText(r domain.Resource) string {
	sleeping := r.Status == domain.StatusHibernated || r.Status == domain.StatusHibernating
	switch {
	case r.Hibernate && r.Status == domain.StatusHibernated:
		return "yes (hibernated)"
	case r.Hibernate:
		return "requested"
	case sleeping:
		return "no (wake requested)"
	}
	return "no"
}

// when renders t with how long ago, or how soon, it is: "2026-12-01T10:00:00Z (3m ago)".
func when(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return t.UTC().Format(time.RFC3339) + " (" + relative(t, now) + ")"
}

// since is when for a time that has passed: one a little ahead of now (the database's clock
// and the CLI's differ) is "0s ago".
func since(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return t.UTC().Format(time.RFC3339) + " (" + age(t, now) + " ago)"
}

// whenAt is when for a time to come: "at T (in 20s)".
func whenAt(t, now time.Time) string { return "at " + when(t, now) }

func relative(t, now time.Time) string {
	if t.After(now) {
		return "in " + duration.HumanDuration(t.Sub(now))
	}
	return age(t, now) + " ago"
}

// age is how long before now t was, as kubectl shows ages ("61s", "3m", "2d").
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(max(now.Sub(t), 0))
}

// orAngle shows an empty value as <what>, as kubectl describe does.
func orAngle(s, what string) string {
	if s == "" {
		return "<" + what + ">"
	}
	return s
}
