package e2e_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// exitCodeOf is the exit code of a berth process that ended with err (0 for nil).
func exitCodeOf(t *testing.T, err error) int {
	t.Helper()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		return exitErr.ExitCode()
	}
	t.Fatalf("berth did not run: %v", err)
	return -1
}

// TestWaitTimesOutWithExitCode3 runs `create --wait --timeout` with no agent: the binary
// prints the id first on stderr, ends at the timeout asked (not at the next 5 s recheck
// after it) with exit code 3, and says that no agent runs. The usage and not-found codes
// come from the same mapping.
func TestWaitTimesOutWithExitCode3(t *testing.T) {
	e := newEnv(t, map[string]int{"h1": 4})
	const timeout = 2 * time.Second
	start := time.Now()
	stdout, stderr, err := e.tryBerth("resource", "create", "--type", "runtime", "--name", "late", "--wait", "--timeout", timeout.String())
	elapsed := time.Since(start)
	if code := exitCodeOf(t, err); code != 3 {
		t.Fatalf("exit code %d, want 3 (timed out)\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	id := lines[len(lines)-1]
	firstLine, _, _ := strings.Cut(stderr, "\n")
	if !strings.Contains(firstLine, "resource "+id+` (runtime "late"): waiting up to 2s`) {
		t.Errorf("stderr does not start with the id:\n%s", stderr)
	}
	for _, want := range []string{
		"berth: --timeout: resource " + id + " is not ready after 2s (status pending, Created",
		"no agent is running against this database: start one with `berth run`",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// The timeout is on its own timer; the margin is the process's start, its database
	// connection and a loaded machine, far below the 5 s recheck that used to end it.
	t.Logf("--timeout %v returned after %v", timeout, elapsed)
	if elapsed < timeout || elapsed > timeout+2*time.Second {
		t.Errorf("--timeout %v returned after %v", timeout, elapsed)
	}

	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"resource", "get", id}, 0},
		{[]string{"resource", "gte", id}, 2},
		{[]string{"resource", "get", "--bogus", id}, 2},
		{[]string{"resource", "get", "00000000-0000-0000-0000-000000000000"}, 4},
	} {
		stdout, stderr, err := e.tryBerth(tt.args...)
		if code := exitCodeOf(t, err); code != tt.code {
			t.Errorf("berth %s: exit code %d, want %d\nstdout: %s\nstderr: %s", strings.Join(tt.args, " "), code, tt.code, stdout, stderr)
		}
	}
}

// TestWaitInterruptedExitsWith130: Ctrl-C during --wait ends berth with the shells' code
// for SIGINT.
func TestWaitInterruptedExitsWith130(t *testing.T) {
	e := newEnv(t, map[string]int{"h1": 4})
	cmd := exec.Command(e.Bin, "resource", "create", "--type", "runtime", "--name", "stopped", "--wait")
	cmd.Env = append(os.Environ(), "BERTH_DATABASE_URL="+e.DatabaseURL, "BERTH_PROVISIONER_SET_JSON=", "BERTH_DEFAULT_PROVISIONER=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The wait has begun once the resource is in the table.
	e.eventually("the resource is created", 10*time.Second, func() (bool, string) {
		n := e.queryInt(`SELECT count(*) FROM resources`)
		return n == 1, "no resource yet"
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := exitCodeOf(t, err); code != 130 {
		t.Errorf("exit code %d after Ctrl-C, want 130\nstderr: %s", code, stderr.String())
	}
}
