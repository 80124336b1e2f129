package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock"
	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
)

// syncBuffer is a bytes.Buffer a test may read while the command under test writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitRun is a command run in the background whose stdout and stderr the test reads as it
// runs.
type waitRun struct {
	stdout, stderr syncBuffer
	done           chan error
}

// start runs the command tree in the background on clk, as runBerth does.
func start(clk clock.Clock, args ...string) *waitRun {
	r := &waitRun{done: make(chan error, 1)}
	cmd := newRootCommandWith(&globalOptions{clock: clk, pollInterval: time.Second})
	cmd.SetArgs(args)
	cmd.SetOut(&r.stdout)
	cmd.SetErr(&r.stderr)
	cmd.SetIn(strings.NewReader(""))
	go func() { r.done <- cmd.ExecuteContext(context.Background()) }()
	return r
}

// result returns the command's error once it has returned; the test fails when it does not.
func (r *waitRun) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(waitLimit):
		t.Fatalf("the command did not return; stderr:\n%s", r.stderr.String())
		return nil
	}
}

// resultRechecking is result for a command that may need a recheck to see a change: it moves
// the clock a recheck on every 100 ms the command runs (a store's wake-ups are hints that may
// be lost).
func (r *waitRun) resultRechecking(t *testing.T, clk *testclock.Clock) error {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case err := <-r.done:
			return err
		case <-deadline:
			t.Fatalf("the command did not return; stderr:\n%s", r.stderr.String())
			return nil
		case <-time.After(100 * time.Millisecond):
			clk.Advance(time.Second)
		}
	}
}

// running fails the test when the command has returned.
func (r *waitRun) running(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		t.Fatalf("the command returned early: %v; stderr:\n%s", err, r.stderr.String())
	case <-time.After(100 * time.Millisecond):
	}
}

// printed waits until the command's stderr holds want.
func (r *waitRun) printed(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(r.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q:\n%s", want, r.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *cli) start(args ...string) *waitRun {
	return start(c.clk, append(args, "--database-url", c.url)...)
}

func (c *storeCLI) start(args ...string) *waitRun {
	return start(c.clk, append(args, "--database-url", c.url)...)
}

// onlyID returns the id of the one resource in the table.
func (c *cli) onlyID() string {
	c.t.Helper()
	rs, err := c.st.ListResources(context.Background(), domain.ListFilter{})
	if err != nil || len(rs) != 1 {
		c.t.Fatalf("resources: %v, %v", rs, err)
	}
	return rs[0].ID
}

// The timeout ends the wait at the time asked on the command's clock, not at the next
// recheck after it (a 1 s recheck here; the agent's wake-ups never come, as nothing moves).
func TestWaitEndsAtTheTimeoutAsked(t *testing.T) {
	c := newCLI(t)
	run := c.start("resource", "create", "--type", "runtime", "--name", "w", "--wait", "--timeout", "8500ms")
	// The timeout's timer and the first recheck's.
	if err := c.clk.WaitAdvance(8500*time.Millisecond-time.Nanosecond, waitLimit, 2); err != nil {
		t.Fatal(err)
	}
	run.running(t)
	c.clk.Advance(time.Nanosecond)
	err := run.result(t)
	if got := exitCode(err); got != exitTimedOut {
		t.Fatalf("exit code %d (%v), want %d", got, err, exitTimedOut)
	}
	id := c.onlyID()
	for _, want := range []string{
		"--timeout: resource " + id + " is not ready after 8.5s (status pending, Created)",
		"no agent is running against this database: start one with `berth run`",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if lines := strings.Split(strings.TrimSpace(run.stdout.String()), "\n"); lines[len(lines)-1] != id {
		t.Errorf("stdout must end with the id, as without --wait:\n%s", run.stdout.String())
	}
}

// --wait prints the id first and then each status change as it happens, on stderr; stdout
// is what the command prints without --wait.
func TestWaitPrintsEachStatusChange(t *testing.T) {
	c := newCLI(t)
	run := c.start("resource", "create", "--type", "runtime", "--name", "p", "--wait", "-o", "json")
	run.printed(t, "pending, Created")
	id := c.onlyID()
	c.record(id, domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "placing on h1"})
	run.printed(t, "provisioning, Provisioning: placing on h1")
	c.record(id, domain.ProgressUpdate{Generation: 1, Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity, StatusMessage: "no host has 2 free slots"})
	run.printed(t, "pending, WaitingForCapacity: no host has 2 free slots (waiting since ")
	one := int64(1)
	c.record(id, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &one})
	if err := run.result(t); err != nil {
		t.Fatalf("create --wait: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(run.stderr.String()), "\n")
	wants := []string{
		"resource " + id + ` (runtime "p"): waiting up to 5m0s for it to be ready`,
		"note: no agent is running against this database: start one with `berth run`",
		"pending, Created",
		"provisioning, Provisioning: placing on h1",
		"pending, WaitingForCapacity: no host has 2 free slots",
		"ready, Available",
	}
	if len(lines) != len(wants) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(wants), run.stderr.String())
	}
	for i, want := range wants {
		stamp, text, _ := strings.Cut(lines[i], " ")
		if _, err := time.Parse(time.RFC3339, stamp); err != nil || !strings.HasPrefix(text, want) {
			t.Errorf("stderr line %d = %q, want an RFC 3339 time and %q", i+1, lines[i], want)
		}
	}
	if obj := decodeResource(t, run.stdout.String()); obj["id"] != id || obj["status"] != "ready" {
		t.Errorf("stdout = %v, want the ready resource alone", obj)
	}
}

func TestWaitQuietPrintsNoProgress(t *testing.T) {
	c := newCLI(t)
	run := c.start("resource", "create", "--type", "runtime", "--name", "q", "--wait", "--quiet")
	// The command has read the resource once and waits for its next change.
	if err := c.clk.WaitAdvance(0, waitLimit, 2); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	c.record(c.onlyID(), domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &one})
	if err := run.result(t); err != nil {
		t.Fatalf("create --wait --quiet: %v", err)
	}
	if got := run.stderr.String(); got != "" {
		t.Errorf("--quiet printed %q on stderr", got)
	}
}

// A wait that times out says why nothing moved: the resource is paused, or waits for
// capacity; with a live agent it does not say that none runs.
func TestWaitTimeoutSaysWhy(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	if _, err := c.st.RegisterAgent(ctx, domain.AgentInfo{ID: "agent-a", Version: "test"}); err != nil {
		t.Fatal(err)
	}
	paused := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "paused", "-o", "json"))["id"].(string)
	c.mustRun("resource", "pause", paused)
	full := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "full", "-o", "json"))["id"].(string)
	c.record(full, domain.ProgressUpdate{Generation: 1, Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity, StatusMessage: "no host has 2 free slots (largest free: 1)"})

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"resource", "delete", "paused", "--wait", "--timeout", "2s"},
			"is not gone after 2s (status deleting (paused), DeleteRequested: delete requested): paused: `berth resource resume " + paused + "` lets the agent carry on"},
		{[]string{"resource", "update", "full", "--arg", "version=1.4.0", "--wait", "--timeout", "2s"},
			"waiting for capacity since "},
	} {
		t.Run(tt.args[1], func(t *testing.T) {
			run := c.start(tt.args...)
			if err := c.clk.WaitAdvance(2*time.Second, waitLimit, 2); err != nil {
				t.Fatal(err)
			}
			err := run.result(t)
			if exitCode(err) != exitTimedOut || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("exit code %d, error %v; want %d and %q", exitCode(err), err, exitTimedOut, tt.want)
			}
			if strings.Contains(err.Error(), "no agent is running") {
				t.Errorf("with a live agent the error says none runs: %v", err)
			}
		})
	}
}

// hibernate, wake and retry wait for what they ask, on each store, and fail (exit code 1)
// on a failure recorded after the request, not on one from before it.
func TestControlsWait(t *testing.T) {
	onEachStore(t, func(t *testing.T, c *storeCLI) {
		id := c.create("sleepy")
		c.makeReady(id)

		run := c.start("resource", "hibernate", id, "--wait")
		run.printed(t, "for it to be hibernated")
		c.record(id, domain.ProgressUpdate{Status: domain.StatusHibernated, Reason: domain.ReasonHibernated, StatusMessage: "hibernated", ReleaseLease: true})
		if err := run.resultRechecking(t, c.clk); err != nil || !strings.Contains(run.stdout.String(), "hibernated: it holds no capacity") {
			t.Fatalf("hibernate --wait: %q, %v", run.stdout.String(), err)
		}

		run = c.start("resource", "wake", id, "--wait", "-o", "json")
		run.printed(t, "hibernated (wake requested), Hibernated")
		c.makeReady(id)
		if err := run.resultRechecking(t, c.clk); err != nil {
			t.Fatalf("wake --wait: %v", err)
		}
		if obj := decodeResource(t, run.stdout.String()); obj["status"] != "ready" || obj["hibernate"] != false {
			t.Errorf("wake --wait printed %v", obj)
		}

		// An environ that cannot hibernate puts the resource in error.
		run = c.start("resource", "hibernate", id, "--wait")
		run.printed(t, "for it to be hibernated")
		c.record(id, domain.ProgressUpdate{Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "this environ cannot hibernate", ReleaseLease: true})
		if err := run.resultRechecking(t, c.clk); exitCode(err) != exitFailed || !strings.Contains(err.Error(), "failed: this environ cannot hibernate") {
			t.Fatalf("hibernate --wait on a failure: exit code %d, %v", exitCode(err), err)
		}

		// The error before the retry does not end its wait; the next failure does.
		run = c.start("resource", "retry", id, "--wait")
		run.printed(t, "error (hibernate requested), BrokerError: this environ cannot hibernate")
		run.running(t)
		c.record(id, domain.ProgressUpdate{Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "still cannot hibernate", ReleaseLease: true})
		if err := run.resultRechecking(t, c.clk); exitCode(err) != exitFailed || !strings.Contains(err.Error(), "failed: still cannot hibernate") {
			t.Fatalf("retry --wait on the next failure: exit code %d, %v", exitCode(err), err)
		}
		c.mustRun("resource", "wake", id)
		run = c.start("resource", "retry", id, "--wait")
		run.printed(t, "error, BrokerError: still cannot hibernate")
		c.makeReady(id)
		if err := run.resultRechecking(t, c.clk); err != nil || !strings.Contains(run.stdout.String(), "retried: it is ready") {
			t.Fatalf("retry --wait: %q, %v", run.stdout.String(), err)
		}
	})
}

// Every command ends with the documented exit code: 0 done, 1 the resource failed, 2 usage,
// 3 timed out, 4 not found, 5 anything else.
func TestExitCodes(t *testing.T) {
	c := newCLI(t)
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "taken", "-o", "json"))["id"].(string)
	c.record(id, domain.ProgressUpdate{Generation: 1, Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "no host has 60 slots"})
	const missing = "00000000-0000-0000-0000-000000000000"
	advance := func() {
		if err := c.clk.WaitAdvance(time.Second, waitLimit, 2); err != nil {
			t.Error(err)
		}
	}
	tests := []struct {
		args  []string
		drive func() // moves the clock while the command waits on it
		code  int
	}{
		{args: []string{"resource", "list"}, code: exitOK},
		{args: []string{"resource", "get", "taken"}, code: exitOK},
		{args: []string{"--help"}, code: exitOK},
		{args: []string{"resource"}, code: exitOK},

		{args: []string{"resource", "wake", "taken", "--wait"}, code: exitFailed},
		// The error of the old args does not count; the attempt at the new ones does.
		{args: []string{"resource", "update", "taken", "--arg", "slots=3", "--wait"}, code: exitFailed,
			drive: func() {
				if err := c.clk.WaitAdvance(0, waitLimit, 2); err != nil {
					t.Error(err)
				}
				c.record(id, domain.ProgressUpdate{Generation: 2, Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "no host has 3 slots"})
			}},

		{args: []string{"nosuch"}, code: exitUsage},
		{args: []string{"resource", "gte"}, code: exitUsage},
		{args: []string{"completion", "bsh"}, code: exitUsage},
		{args: []string{"resource", "list", "--bogus"}, code: exitUsage},
		{args: []string{"--bogus"}, code: exitUsage},
		{args: []string{"resource", "get"}, code: exitUsage},
		{args: []string{"resource", "hibernate", "a", "b"}, code: exitUsage},
		{args: []string{"resource", "create", "--type", "runtime", "--name", "a\tb"}, code: exitUsage},
		{args: []string{"resource", "create", "--type", "runtime", "--name", "x", "--arg", "slots=0"}, code: exitUsage},
		{args: []string{"resource", "delete", "taken", "--wait", "--timeout", "0s"}, code: exitUsage},
		{args: []string{"resource", "list", "-o", "xml"}, code: exitUsage},
		{args: []string{"resource", "list", "--sort-by", "{"}, code: exitUsage},
		{args: []string{"resource", "update", "taken"}, code: exitUsage},
		{args: []string{"resource", "events", "taken", "--limit", "0"}, code: exitUsage},
		{args: []string{"resource", "describe", "taken", "-o", "json"}, code: exitUsage},
		{args: []string{"resource", "retry", "--all-failed", "--wait"}, code: exitUsage},

		{args: []string{"resource", "delete", "taken", "--wait", "--timeout", "1s"}, drive: advance, code: exitTimedOut},

		{args: []string{"resource", "get", missing}, code: exitNotFound},
		{args: []string{"resource", "get", "nosuch"}, code: exitNotFound},
		{args: []string{"resource", "hibernate", "nosuch"}, code: exitNotFound},
		{args: []string{"resource", "retry", missing, "--wait"}, code: exitNotFound},
		{args: []string{"resource", "events", missing}, code: exitNotFound},

		{args: []string{"resource", "create", "--type", "runtime", "--name", "taken"}, code: exitOther},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			run := c.start(tt.args...)
			if tt.drive != nil {
				tt.drive()
			}
			err := run.result(t)
			if got := exitCode(err); got != tt.code {
				t.Errorf("exit code %d (error %v), want %d", got, err, tt.code)
			}
		})
	}

	// The database unreachable.
	_, _, err := runBerth(c.clk, "resource", "list", "--database-url", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if got := exitCode(err); got != exitOther {
		t.Errorf("an unreachable database: exit code %d (error %v), want %d", got, err, exitOther)
	}
}

// berth --help lists the exit codes, as the README does.
func TestHelpListsTheExitCodes(t *testing.T) {
	clearEnv(t)
	out, _, err := runBerth(clock.WallClock, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for code, word := range []string{"done", "failed", "usage", "--timeout passed", "not found", "anything else"} {
		if want := fmt.Sprintf("  %d  ", code); !strings.Contains(out, want) || !strings.Contains(out, word) {
			t.Errorf("berth --help lacks exit code %d (%s):\n%s", code, word, out)
		}
	}
}
