package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// wantLines fails for each pattern (a multi-line regexp) the output does not match.
func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile("(?m)" + p).MatchString(out) {
			t.Errorf("describe lacks %s:\n%s", p, out)
		}
	}
}

func TestDescribeFoldsEventsAndSaysWhatComesNext(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	next := now.Add(40 * time.Second)
	expires := now.Add(12 * time.Second)
	lastAttempt := now.Add(-10 * time.Second)
	r := domain.Resource{
		ID: "3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a", Type: domain.ResourceTypeRuntime, Name: "web", Owner: "acme", Provisioner: "pool",
		Labels: map[string]string{"tier": "prod", "team": "data"}, Args: map[string]any{"slots": 2},
		Generation: 2, ObservedGeneration: 1, Status: domain.StatusProvisioning, StatusMessage: "attempt 4 failed: host down; retrying at T",
		Reason: domain.ReasonBackoff, StateTimes: domain.StateTimes{LastAttemptAt: &lastAttempt},
		StatusChangedAt: now.Add(-3 * time.Minute), CreatedAt: now.Add(-10 * time.Minute),
		Attempts: 4, LastError: "host down", NextAttemptAt: &next,
		LeaseHolder: "agent-1", LeaseExpiresAt: &expires,
	}
	ev := func(ago time.Duration, kind domain.EventKind, status domain.Status, msg string) domain.Event {
		return domain.Event{At: now.Add(-ago), Kind: kind, Status: status, Message: msg}
	}
	events := []domain.Event{
		ev(10*time.Minute, domain.EventStatus, domain.StatusPending, "created"),
		ev(3*time.Minute, domain.EventError, domain.StatusProvisioning, "attempt failed: host down"),
		ev(2*time.Minute, domain.EventError, domain.StatusProvisioning, "attempt failed: host down"),
		ev(time.Minute, domain.EventError, domain.StatusProvisioning, "attempt failed: host down"),
		ev(10*time.Second, domain.EventError, domain.StatusProvisioning, "attempt failed: host down"),
		ev(5*time.Second, domain.EventControl, domain.StatusProvisioning, "labels changed: team=data, tier=prod"),
	}
	var buf bytes.Buffer
	if err := writeDescription(&buf, r, events, now); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	wantLines(t, out,
		`^Name:\s+web$`,
		`^ID:\s+3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a$`,
		`^Owner:\s+acme$`,
		`^Provisioner:\s+pool$`,
		`^Labels:\s+team=data\n\s+tier=prod\n`,
		`^Args:\s+slots=2$`,
		`^Generation:\s+2 \(observed 1\)$`,
		`^Created:\s+2026-12-01T11:50:00Z \(10m ago\)$`,
		`^Status:\s+provisioning$`,
		`^Reason:\s+Backoff$`,
		`^Message:\s+attempt 4 failed: host down; retrying at T$`,
		`^Status since:\s+2026-12-01T11:57:00Z \(3m ago\)$`,
		`^Last attempt:\s+2026-12-01T11:59:50Z \(10s ago\)$`,
		`^Attempts:\s+4 failed`,
		`^Last error:\s+host down$`,
		"^Next attempt:\\s+backoff until 2026-12-01T12:00:40Z \\(in 40s\\), after 4 failed attempt\\(s\\); `berth resource retry 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a` tries it now$",
		`^Lease:\s+held by agent-1 until 2026-12-01T12:00:12Z \(in 12s\)$`,
		`^Retry requested:\s+<never>$`,
		`^Conditions:\n\s+TYPE\s+STATUS\s+REASON\s+OBSERVED GEN\s+LAST TRANSITION\s+MESSAGE$`,
		`^\s+Ready\s+False\s+Provisioning\s+1\s+3m ago\s+attempt 4 failed: host down; retrying at T$`,
		`^\s+Synced\s+False\s+ReconcileError\s+1\s+3m ago\s+host down$`,
		`^Events \(oldest first\):\n\s+AGE\s+KIND\s+STATUS\s+MESSAGE$`,
		`^\s+10m\s+status\s+pending\s+created$`,
		`^\s+10s \(x4 over 3m\)\s+error\s+provisioning\s+attempt failed: host down$`,
		`^\s+5s\s+control\s+provisioning\s+labels changed: team=data, tier=prod$`,
	)
	if n := strings.Count(out, "attempt failed: host down"); n != 1 {
		t.Errorf("the repeated event shows %d times, want once, folded:\n%s", n, out)
	}

	buf.Reset()
	if err := writeDescription(&buf, domain.Resource{ID: "x", Type: domain.ResourceTypeRuntime, Name: "new", Status: domain.StatusPending,
		Reason: domain.ReasonCreated, Generation: 1}, nil, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Waiting since") {
		t.Errorf("a resource not waiting for capacity shows since when it waits:\n%s", buf.String())
	}
	wantLines(t, buf.String(), `^Reason:\s+Created$`, `^Last attempt:\s+<never>$`, `^Owner:\s+<none>$`, `^Labels:\s+<none>$`, `^Provisioner:\s+<the agent's default, not yet chosen>$`,
		`^Lease:\s+<none>$`, `^Events: <none>$`, `^Next attempt:\s+now: queued for its owner.s turn \(agents serve owners in turn, by weight: .berth owners.\); an agent brings it to generation 1 when it takes the row$`)
}

func TestNextAttemptSaysWhy(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	const id = "r1"
	tests := []struct {
		name string
		r    domain.Resource
		want string
	}{
		{"paused beats a backoff", domain.Resource{Paused: true, Status: domain.StatusProvisioning, NextAttemptAt: at(time.Minute)},
			"none while paused: the agent leaves it alone until `berth resource resume r1`"},
		{"backoff", domain.Resource{Status: domain.StatusProvisioning, Attempts: 2, NextAttemptAt: at(90 * time.Second)},
			"backoff until 2026-12-01T12:01:30Z (in 90s), after 2 failed attempt(s); `berth resource retry r1` tries it now"},
		{"backoff over", domain.Resource{Status: domain.StatusProvisioning, Attempts: 2, NextAttemptAt: at(-5 * time.Second)},
			"due since 2026-12-01T11:59:55Z (5s ago): an agent takes it on its next pass"},
		{"waiting for capacity", domain.Resource{Status: domain.StatusPending, NextAttemptAt: at(30 * time.Second),
			Reason: domain.ReasonWaitingForCapacity, StateTimes: domain.StateTimes{WaitingSince: at(-5 * time.Minute)},
			StatusMessage: "waiting for capacity: no host has 4 free slots"},
			"waiting for capacity since 2026-12-01T11:55:00Z (5m ago): tried again at 2026-12-01T12:00:30Z (in 30s), or sooner when room frees on its provisioner"},
		{"permanent failure", domain.Resource{Status: domain.StatusError, LastError: "unknown provisioner", Generation: 3},
			"none: failed for good at generation 3; waiting for new args (`berth resource update r1`) or `berth resource retry r1`; " +
				"if its provisioner is gone, move it (`berth resource update r1 --provisioner NAME`) or forget it (`berth resource delete r1 --force`)"},
		{"never fits", domain.Resource{Status: domain.StatusError, Reason: domain.ReasonNeverFits, Generation: 3, LastError: "args.slots: 5 slots can never fit"},
			"none: failed for good at generation 3, since it can never fit its provisioner; ask for less (`berth resource update r1 --arg ...`) or grow the provisioner set (it is retried then)"},
		{"resize waiting", domain.Resource{Status: domain.StatusReady, Reason: domain.ReasonResizeWaitingForCapacity, Generation: 3, ObservedGeneration: 2},
			"serving generation 2 while generation 3 waits for capacity: when room frees"},
		{"breaker open", domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonBrokerUnavailable, NextAttemptAt: at(10 * time.Second)},
			"waits for its provisioner's broker, whose circuit breaker is open (`berth capacity`): at the breaker's next probe, at 2026-12-01T12:00:10Z (in 10s)"},
		{"owner's turn", domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonCreated, Generation: 1},
			"now: queued for its owner's turn (agents serve owners in turn, by weight: `berth owners`); an agent brings it to generation 1 when it takes the row"},
		{"hibernated", domain.Resource{Hibernate: true, Status: domain.StatusHibernated},
			"none while hibernated: `berth resource wake r1` brings it back"},
		{"hibernate requested", domain.Resource{Hibernate: true, Status: domain.StatusReady}, "now: the agent hibernates it"},
		{"wake requested", domain.Resource{Status: domain.StatusHibernated}, "now: the agent wakes it"},
		{"deleting", domain.Resource{Status: domain.StatusDeleting}, "now: the agent frees what it holds and removes it"},
		{"deprovision failed", domain.Resource{Status: domain.StatusDeleting, Attempts: 1, NextAttemptAt: at(time.Second)},
			"deprovision retried at 2026-12-01T12:00:01Z (in 1s), after 1 failed attempt(s)"},
		{"ready", domain.Resource{Status: domain.StatusReady, Generation: 2, ObservedGeneration: 2}, "none: provisioned at generation 2 (health checks go on)"},
	}
	for _, tt := range tests {
		tt.r.ID = id
		if got := nextAttempt(tt.r, now); got != tt.want {
			t.Errorf("%s: next attempt\n%q, want\n%q", tt.name, got, tt.want)
		}
	}
}

func TestDescribeOnEachStore(t *testing.T) {
	onEachStore(t, func(t *testing.T, c *storeCLI) {
		id := c.create("web", "--owner", "acme", "--label", "team=data", "--arg", "slots=2")
		c.record(id, domain.ProgressUpdate{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "attempt 2 failed: host refused; retrying at T",
			Provisioner: "pool", Attempts: 2, LastError: "host refused", RetryIn: 5 * time.Minute})
		out := c.mustRun("resource", "describe", "web", "--owner", "acme")
		wantLines(t, out,
			`^Name:\s+web$`, `^ID:\s+`+id+`$`, `^Type:\s+runtime$`, `^Owner:\s+acme$`, `^Provisioner:\s+pool$`,
			`^Labels:\s+team=data$`, `^Args:\s+slots=2$`, `^Generation:\s+1 \(observed 0\)$`,
			`^Created:\s+\S+ \(\d+s ago\)$`, `^Status:\s+provisioning$`, `^Message:\s+attempt 2 failed: host refused; retrying at T$`,
			`^Paused:\s+no$`, `^Hibernate:\s+no$`, `^Attempts:\s+2 failed`, `^Last error:\s+host refused$`,
			// The retry is due five minutes after the write on the store's clock, which a
			// loaded machine may put a few seconds after the command's.
			`^Next attempt:\s+backoff until \S+ \(in (5m|5m\d+s|4m\d+s)\), after 2 failed attempt\(s\)`,
			`^Lease:\s+held by test-agent until \S+ \(in \d+s\)$`,
			`^Retry requested:\s+<never>$`,
			`^\s+Ready\s+False\s+Provisioning\s+0\s+`,
			`^\s+Synced\s+False\s+ReconcileError\s+0\s+.*host refused$`,
			`^\s+\S+\s+status\s+pending\s+created$`,
			`^\s+\S+\s+error\s+provisioning\s+attempt 2 failed: host refused; retrying at T$`,
		)

		c.mustRun("resource", "pause", id)
		c.mustRun("resource", "retry", id)
		out = c.mustRun("resource", "describe", id)
		wantLines(t, out,
			`^Status:\s+provisioning \(paused\)$`, `^Paused:\s+yes$`, `^Attempts:\s+0 failed`, `^Last error:\s+<none>$`,
			"^Next attempt:\\s+none while paused: the agent leaves it alone until `berth resource resume "+id+"`$",
			`^Retry requested:\s+\S+ \(`,
			`^\s+Synced\s+False\s+Paused\s+`,
			`^\s+\S+\s+control\s+provisioning\s+paused$`,
			`^\s+\S+\s+control\s+provisioning\s+retry requested$`,
		)
	})
}
