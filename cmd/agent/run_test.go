package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/worker/provisioner"
)

// A flag that sets a worker's setting to a value its worker refuses is named in berth run's
// error, with what it must be, before the agent opens anything.
func TestRunNamesTheFlagOfAnInvalidSetting(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent-id", ""}, "--agent-id is empty: pass a name unique to this agent (or set BERTH_AGENT_ID)"},
		{[]string{"--concurrency", "0"}, "--concurrency must be at least 1, got 0"},
		{[]string{"--await-concurrency", "0"}, "--await-concurrency must be at least 1, got 0"},
		{[]string{"--reconcile-timeout", "0s"}, "--reconcile-timeout must be positive"},
		{[]string{"--lease-ttl", "1m"}, "--lease-ttl (1m0s) must exceed --reconcile-timeout (5m0s), or another agent could take over a resource mid-reconcile"},
		{[]string{"--backoff-base", "0s"}, "--backoff-base must be positive"},
		{[]string{"--backoff-max", "1ms"}, "--backoff-max (1ms) must be at least --backoff-base (1s)"},
		{[]string{"--capacity-retry", "0s"}, "--capacity-retry must be positive"},
		{[]string{"--poll-interval", "0s"}, "--poll-interval must be positive"},
		{[]string{"--change-log-retention", "0s"}, "--change-log-retention must be positive"},
		{[]string{"--event-retention", "0s"}, "--event-retention must be positive"},
		{[]string{"--health-interval", "0s"}, "--health-interval must be positive"},
		{[]string{"--health-concurrency", "0"}, "--health-concurrency must be at least 1, got 0"},
		{[]string{"--capacity-interval", "0s"}, "--capacity-interval must be positive"},
		{[]string{"--capacity-warn-total", "80"}, "--capacity-warn-total must be a fraction in (0, 1]"},
		{[]string{"--capacity-warn-host", "0"}, "--capacity-warn-host must be a fraction in (0, 1]"},
		{[]string{"--shutdown-timeout", "0s"}, "--shutdown-timeout must be positive"},
		{[]string{"--http-addr", "9090"}, `--http-addr must be HOST:PORT, e.g. 127.0.0.1:9090, got "9090"`},
	} {
		_, _, err := runBerth(testclock.NewClock(time.Now()), append([]string{"run", "--agent-id", "a"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("berth run %v: err = %v; want %q", tc.args, err, tc.want)
		}
	}
}

// berth run's help gives --concurrency's default, the ceiling of the adaptive limit, and
// where the limit starts, as the provisioner has them.
func TestRunHelpGivesTheConcurrencyDefault(t *testing.T) {
	clearEnv(t)
	out, _, err := runBerth(testclock.NewClock(time.Now()), "run", "--help")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		for _, flag := range []string{"--concurrency int", "--min-concurrency int"} {
			if strings.Contains(l, flag) {
				lines[flag] = l
			}
		}
	}
	for flag, want := range map[string]string{
		"--concurrency int":     fmt.Sprintf("grows fourfold while that raises throughput, up to this (at or below --min-concurrency: fixed) (default %d)", provisioner.DefaultConcurrency),
		"--min-concurrency int": fmt.Sprintf("set it to --concurrency for a fixed limit (default %d)", provisioner.InitialConcurrency),
	} {
		if !strings.Contains(lines[flag], want) {
			t.Errorf("berth run --help: the %s line %q lacks %q", flag, lines[flag], want)
		}
	}
}

// The agent sets its collector's target unless the operator set GOGC, whose value stays.
func TestRunSetsTheGCPercentUnlessGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50) // as the runtime read it at start
	if got := setGCPercent(); got != 50 {
		t.Errorf("with GOGC=50 the target in force is %d; want 50", got)
	}
	if got := debug.SetGCPercent(50); got != 50 {
		t.Errorf("with GOGC=50 the target was changed to %d", got)
	}

	os.Unsetenv("GOGC")
	if got := setGCPercent(); got != agentGCPercent {
		t.Errorf("without GOGC the target in force is %d; want %d", got, agentGCPercent)
	}
	if got := debug.SetGCPercent(100); got != agentGCPercent {
		t.Errorf("without GOGC the collector's target is %d; want %d", got, agentGCPercent)
	}
}
