package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/juju/clock"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/berth-dev/berth/domain"
)

// defaultWaitTimeout bounds --wait unless --timeout says otherwise.
const defaultWaitTimeout = 5 * time.Minute

// waitHelp says what every --wait does, for the Long help of the commands that take it.
const waitHelp = `With --wait the command prints, on stderr, the resource's id and then each change of its
status as it happens (time, status, reason, message) until the wait ends; --quiet leaves
stderr to errors. Stdout is the same with or without --wait. The wait ends at --timeout
(exit code 3), when the resource fails (exit code 1) or when it gets there (exit code 0).`

func addWaitFlags(cmd *cobra.Command, wait *bool, timeout *time.Duration, until string) {
	cmd.Flags().BoolVar(wait, "wait", false, "wait "+until+", printing each status change on stderr")
	cmd.Flags().DurationVar(timeout, "timeout", defaultWaitTimeout, "how long --wait waits (e.g. 90s, 10m); past it the command exits with code 3")
	cmd.Flags().Bool("quiet", false, "print no progress while --wait waits (errors still go to stderr)")
}

func checkTimeout(wait bool, timeout time.Duration) error {
	if wait && timeout <= 0 {
		return usageError(fmt.Errorf("--timeout: must be positive, got %v (e.g. --timeout 5m)", timeout))
	}
	return nil
}

// waitGoal is where a --wait wants a resource.
type waitGoal struct {
	what string // what the resource is to become, for the messages: "ready", "hibernated", "gone"
	// done says whether the resource got there; nil when only the removal of its row does.
	done func(domain.Resource) bool
	// failed says why the resource will not get there ("" while it still may).
	failed func(domain.Resource) string
}

// readyGoal waits for the resource to be ready at its current generation. An error status
// fails the wait, unless staleError (the error of the previous args, which says nothing about
// the new ones): then only an error recorded by an attempt at or after since (the change of
// args, database clock), or after a status other than error was seen, counts.
func readyGoal(staleError bool, since time.Time) waitGoal {
	return waitGoal{
		what: "ready",
		done: domain.Resource.UpToDate,
		failed: func(cur domain.Resource) string {
			switch {
			case cur.Status == domain.StatusDeleting:
				return "it is being deleted: it will not become ready"
			case cur.Status != domain.StatusError:
				staleError = false
			case !staleError || attemptSince(cur, since):
				return orNone(cur.StatusMessage)
			}
			return ""
		},
	}
}

// goneGoal waits for the resource's row to be removed: its deletion is retried until it is.
func goneGoal() waitGoal {
	return waitGoal{what: "gone", failed: func(domain.Resource) string { return "" }}
}

// hibernatedGoal waits for the resource to be hibernated; an error recorded at or after
// since (the hibernate request, database clock) fails the wait.
func hibernatedGoal(since time.Time) waitGoal {
	return waitGoal{
		what: "hibernated",
		done: func(cur domain.Resource) bool { return cur.Status == domain.StatusHibernated },
		failed: func(cur domain.Resource) string {
			switch {
			case cur.Status == domain.StatusDeleting:
				return "it is being deleted: it will not hibernate"
			case !cur.Hibernate:
				return fmt.Sprintf("a wake was asked for meanwhile: it will not hibernate (`berth resource hibernate %s` asks again)", cur.ID)
			case cur.Status == domain.StatusError && attemptSince(cur, since):
				return orNone(cur.StatusMessage)
			}
			return ""
		},
	}
}

// wokenGoal waits for the resource to be ready at its generation, no longer hibernated; an
// error recorded at or after since (the wake request, database clock) fails the wait.
func wokenGoal(since time.Time) waitGoal {
	return waitGoal{
		what: "ready",
		done: func(cur domain.Resource) bool { return !cur.Hibernate && cur.UpToDate() },
		failed: func(cur domain.Resource) string {
			switch {
			case cur.Status == domain.StatusDeleting:
				return "it is being deleted: it will not wake"
			case cur.Hibernate:
				return fmt.Sprintf("a hibernate was asked for meanwhile: it will not wake (`berth resource wake %s` asks again)", cur.ID)
			case cur.Status == domain.StatusError && attemptSince(cur, since):
				return orNone(cur.StatusMessage)
			}
			return ""
		},
	}
}

// retriedGoal waits for what r (as the retry left it) is asked to become: gone when it is
// being deleted, hibernated when a hibernate is asked for, else ready at its generation. The
// first attempt that fails after the retry request fails the wait, whether it is retried
// (Backoff) or not (error): it is the outcome the retry asked for.
func retriedGoal(r domain.Resource) waitGoal {
	var goal waitGoal
	switch {
	case r.Status == domain.StatusDeleting:
		goal = goneGoal()
	case r.Hibernate:
		goal = waitGoal{what: "hibernated", done: func(cur domain.Resource) bool { return cur.Status == domain.StatusHibernated }}
	default:
		goal = waitGoal{what: "ready", done: domain.Resource.UpToDate}
	}
	goal.failed = func(cur domain.Resource) string {
		failed := cur.Status == domain.StatusError || cur.Reason == domain.ReasonBackoff
		if !failed || r.RetryRequestedAt == nil || cur.LastAttemptAt == nil || !cur.LastAttemptAt.After(*r.RetryRequestedAt) {
			return ""
		}
		if cur.Reason == domain.ReasonBackoff && cur.NextAttemptAt != nil {
			return fmt.Sprintf("%s (the agent tries again at %s)", orNone(cur.StatusMessage), cur.NextAttemptAt.UTC().Format(time.RFC3339))
		}
		return orNone(cur.StatusMessage)
	}
	return goal
}

// attemptSince reports whether the agent recorded an attempt of r at or after since.
func attemptSince(r domain.Resource, since time.Time) bool {
	return r.LastAttemptAt != nil && !r.LastAttemptAt.Before(since)
}

// waitReady waits until r, as just written, is ready at its current generation (see
// readyGoal).
func waitReady(cmd *cobra.Command, opts *globalOptions, svc *domain.Service, r domain.Resource, staleError bool, timeout time.Duration) (domain.Resource, error) {
	return waitFor(cmd, opts, svc, r, readyGoal(staleError, r.UpdatedAt), timeout)
}

// waitGone waits until the resource's row is gone.
func waitGone(cmd *cobra.Command, opts *globalOptions, svc *domain.Service, r domain.Resource, timeout time.Duration) error {
	_, err := waitFor(cmd, opts, svc, r, goneGoal(), timeout)
	return err
}

// waitFor waits (Service.Wait) until r gets where goal wants it, printing its id and then
// each change of its status on cmd's stderr (unless --quiet). It returns the resource as last
// read, and an error carrying exit code 1 when goal says it failed or it was deleted, or 3
// when timeout passes on opts.clock first: the timeout ends the wait then, not at the next
// recheck.
func waitFor(cmd *cobra.Command, opts *globalOptions, svc *domain.Service, r domain.Resource, goal waitGoal, timeout time.Duration) (domain.Resource, error) {
	ctx := cmd.Context()
	p := newProgress(cmd, opts)
	p.printf("resource %s (%s %q): waiting up to %v for it to be %s", r.ID, r.Type, tableText(r.Name), timeout, goal.what)
	for _, note := range stallNotes(ctx, svc, r) {
		p.printf("note: %s", note)
	}

	waitCtx, cancel := withClockTimeout(ctx, opts.clock, timeout)
	defer cancel()
	last, err := svc.Wait(waitCtx, opts.clock, r.ID, func(cur domain.Resource, err error) (bool, error) {
		switch {
		case errors.Is(err, domain.ErrNotFound):
			p.removed()
			if goal.done == nil {
				return true, nil
			}
			return false, failedError(fmt.Errorf("resource %s was deleted while waiting for it to be %s", r.ID, goal.what))
		case err != nil:
			return false, err
		}
		p.show(cur)
		if goal.done != nil && goal.done(cur) {
			return true, nil
		}
		if why := goal.failed(cur); why != "" {
			return false, failedError(fmt.Errorf("resource %s failed: %s", r.ID, why))
		}
		return false, nil
	}, opts.pollInterval)
	if last.ID == "" {
		last = r
	}
	var coded *exitError
	if err != nil && !errors.As(err, &coded) && ctx.Err() == nil && errors.Is(context.Cause(waitCtx), errWaitTimedOut) {
		return last, timedOut(ctx, svc, last, goal, timeout)
	}
	return last, err
}

// timedOut is the error of a wait for goal that timeout ended, with r as last read: where r
// is, and why it is not moving when the agents table, r's pause or its reason say why.
func timedOut(ctx context.Context, svc *domain.Service, r domain.Resource, goal waitGoal, timeout time.Duration) error {
	why := stallNotes(ctx, svc, r)
	if r.Reason == domain.ReasonWaitingForCapacity {
		why = append(why, capacityNote(r))
	}
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("the agent keeps working on it: `berth resource describe %s` says why it is where it is", r.ID))
	}
	return &exitError{code: exitTimedOut, err: fmt.Errorf("--timeout: resource %s is not %s after %v (status %s): %s",
		r.ID, goal.what, timeout, statusLine(r), strings.Join(why, "; "))}
}

// stallNotes says why nothing may happen to r: no live agent in the agents table, or r
// paused. A failed look at the agents table says nothing: the wait reports the database's
// errors itself.
func stallNotes(ctx context.Context, svc *domain.Service, r domain.Resource) []string {
	var notes []string
	if live, err := svc.LiveAgents(ctx, defaultAgentTTL); err == nil && len(live) == 0 {
		notes = append(notes, "no agent is running against this database: start one with `berth run`")
	}
	if r.Paused {
		notes = append(notes, fmt.Sprintf("paused: `berth resource resume %s` lets the agent carry on", r.ID))
	}
	return notes
}

// capacityNote says that r waits for capacity, since when and why.
func capacityNote(r domain.Resource) string {
	since := ""
	if r.WaitingSince != nil {
		since = " since " + r.WaitingSince.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("waiting for capacity%s (%s): the agent places it once room frees; `berth capacity` shows what is free", since, orNone(r.StatusMessage))
}

// statusLine is r's status, reason and message in one line: "pending, WaitingForCapacity:
// no host has 2 free slots".
func statusLine(r domain.Resource) string {
	line := statusText(r)
	if r.Reason != "" {
		line += ", " + string(r.Reason)
	}
	if r.StatusMessage != "" {
		line += ": " + tableText(r.StatusMessage)
	}
	if r.Reason == domain.ReasonWaitingForCapacity && r.WaitingSince != nil {
		line += " (waiting since " + r.WaitingSince.UTC().Format(time.RFC3339) + ")"
	}
	return line
}

// progress prints a wait's progress, one line each, on stderr: nothing with --quiet.
type progress struct {
	w        io.Writer // nil with --quiet
	opts     *globalOptions
	terminal bool   // times are local clock times on a terminal, RFC 3339 UTC elsewhere (logs)
	last     string // the status line printed last
}

func newProgress(cmd *cobra.Command, opts *globalOptions) *progress {
	if quiet, _ := cmd.Flags().GetBool("quiet"); quiet {
		return &progress{opts: opts}
	}
	w := cmd.ErrOrStderr()
	f, isFile := w.(*os.File)
	return &progress{w: w, opts: opts, terminal: isFile && term.IsTerminal(int(f.Fd()))}
}

func (p *progress) printf(format string, args ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, "%s %s\n", p.stamp(p.opts.clock.Now()), fmt.Sprintf(format, args...))
	}
}

// show prints r's status line when it differs from the one printed last, stamped with the
// time of r's last write.
func (p *progress) show(r domain.Resource) {
	line := statusLine(r)
	if line == p.last || p.w == nil {
		return
	}
	p.last = line
	at := r.UpdatedAt
	if at.IsZero() {
		at = p.opts.clock.Now()
	}
	fmt.Fprintf(p.w, "%s %s\n", p.stamp(at), line)
}

func (p *progress) removed() {
	p.printf("removed")
}

func (p *progress) stamp(t time.Time) string {
	if p.terminal {
		return t.Local().Format(time.TimeOnly)
	}
	return t.UTC().Format(time.RFC3339)
}

// errWaitTimedOut is the cause of a wait's context that its --timeout ended.
var errWaitTimedOut = errors.New("--timeout passed")

// withClockTimeout is ctx ended after d on clk (the command's clock, which tests replace),
// with errWaitTimedOut as its cause.
func withClockTimeout(ctx context.Context, clk clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	waitCtx, cancel := context.WithCancelCause(ctx)
	timer := clk.AfterFunc(d, func() { cancel(errWaitTimedOut) })
	return waitCtx, func() {
		timer.Stop()
		cancel(context.Canceled)
	}
}
