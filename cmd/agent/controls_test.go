package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/internal/pgtest"
)

// storeCLI runs commands against a migrated database of either store.
type storeCLI struct {
	t   *testing.T
	url string
	clk *testclock.Clock
	st  store.DB
}

// onEachStore runs test on a fresh PostgreSQL database and a fresh SQLite file.
func onEachStore(t *testing.T, test func(t *testing.T, c *storeCLI)) {
	for _, kind := range []store.Kind{store.Postgres, store.SQLite} {
		t.Run(string(kind), func(t *testing.T) {
			clearEnv(t)
			url := sqliteURL(t)
			if kind == store.Postgres {
				url = pgtest.New(t)
			}
			st := openTestStore(t, url)
			if err := st.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			test(t, &storeCLI{t: t, url: url, clk: testclock.NewClock(time.Now()), st: st})
		})
	}
}

func (c *storeCLI) run(args ...string) (string, string, error) {
	return runBerth(c.clk, append(args, "--database-url", c.url)...)
}

func (c *storeCLI) mustRun(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("berth %s: %v (stderr %q)", strings.Join(args, " "), err, errOut)
	}
	return out
}

// create creates a runtime with the extra flags and returns its id.
func (c *storeCLI) create(name string, extra ...string) string {
	c.t.Helper()
	args := append([]string{"resource", "create", "--type", "runtime", "--name", name, "-o", "json"}, extra...)
	return decodeResource(c.t, c.mustRun(args...))["id"].(string)
}

// record writes u as an agent holding the resource's lease would, keeping the lease unless
// u releases it.
func (c *storeCLI) record(id string, u domain.ProgressUpdate) domain.Resource {
	c.t.Helper()
	ctx := context.Background()
	claim, err := c.st.ClaimResource(ctx, id, "test-agent", time.Minute)
	if err != nil {
		c.t.Fatal(err)
	}
	if u.Generation == 0 {
		u.Generation = claim.Resource.Generation
	}
	r, err := c.st.RecordProgress(ctx, id, claim.Lease, u)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// makeReady records the resource ready at its generation on provisioner pool, as an agent
// does, and releases the lease.
func (c *storeCLI) makeReady(id string) {
	c.t.Helper()
	r, err := c.st.GetResource(context.Background(), id)
	if err != nil {
		c.t.Fatal(err)
	}
	c.record(id, domain.ProgressUpdate{Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "ready at generation 1", Provisioner: "pool",
		ObservedGeneration: &r.Generation, ReleaseLease: true})
}

func (c *storeCLI) get(id string) domain.Resource {
	c.t.Helper()
	r, err := c.st.GetResource(context.Background(), id)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// listStatus returns the STATUS cell of id's row in `resource list`.
func (c *storeCLI) listStatus(id string) string {
	c.t.Helper()
	out := c.mustRun("resource", "list")
	lines := strings.Split(out, "\n")
	start := strings.Index(lines[0], "STATUS")
	end := strings.Index(lines[0], "GEN")
	for _, line := range lines[1:] {
		if strings.HasPrefix(line, id) {
			return strings.TrimSpace(line[start:end])
		}
	}
	c.t.Fatalf("resource %s is not in the list:\n%s", id, out)
	return ""
}

// controlEvents returns the messages of the resource's control events, oldest first.
func (c *storeCLI) controlEvents(id string) []string {
	c.t.Helper()
	var events []eventJSON
	decodeOne(c.t, c.mustRun("resource", "events", id, "-o", "json"), &events)
	msgs := []string{}
	for _, e := range events {
		if e.Kind == string(domain.EventControl) {
			msgs = append(msgs, e.Message)
		}
	}
	return msgs
}

func TestControlsOnEachStore(t *testing.T) {
	onEachStore(t, func(t *testing.T, c *storeCLI) {
		id := c.create("web", "--label", "team=data", "--label", "tier=dev")
		c.makeReady(id)
		doneLine := func(out, want string) {
			t.Helper()
			prefix := "resource " + id + ` (runtime "web"): `
			if out != prefix+want+"\n" {
				t.Errorf("printed %q,\nwant    %q", out, prefix+want+"\n")
			}
		}

		doneLine(c.mustRun("resource", "pause", id), "paused: the agent leaves it alone until `berth resource resume "+id+"`")
		doneLine(c.mustRun("resource", "pause", "web"), "already paused: the agent leaves it alone until `berth resource resume "+id+"`")
		if got := c.listStatus(id); got != "ready (paused)" {
			t.Errorf("list status of a paused resource = %q, want ready (paused)", got)
		}
		if got := c.mustRun("resource", "get", id); !regexp.MustCompile(`(?m)^status:\s+ready \(paused\)$`).MatchString(got) {
			t.Errorf("get of a paused resource:\n%s", got)
		}
		if obj := decodeResource(t, c.mustRun("resource", "get", id, "-o", "json")); obj["paused"] != true {
			t.Errorf("get -o json of a paused resource: paused = %v", obj["paused"])
		}
		if got := c.mustRun("resource", "pause", id, "-o", "yaml"); !regexp.MustCompile(`(?m)^paused: true$`).MatchString(got) || !strings.Contains(got, "id: "+id+"\n") {
			t.Errorf("pause -o yaml printed:\n%s", got)
		}
		doneLine(c.mustRun("resource", "resume", id), "resumed: the agent takes it at once and applies any change made while it was paused")
		doneLine(c.mustRun("resource", "resume", id), "not paused: nothing to resume, the agent is already looking after it")

		doneLine(c.mustRun("resource", "hibernate", id),
			"hibernate requested: the agent stops it keeping its data; it shows hibernated when done, and `berth resource wake "+id+"` brings it back")
		if got := c.listStatus(id); got != "ready (hibernate requested)" {
			t.Errorf("list status = %q, want ready (hibernate requested)", got)
		}
		if obj := decodeResource(t, c.mustRun("resource", "get", id, "-o", "json")); obj["hibernate"] != true {
			t.Errorf("get -o json: hibernate = %v, want true", obj["hibernate"])
		}
		c.record(id, domain.ProgressUpdate{Status: domain.StatusHibernated, Reason: domain.ReasonHibernated, StatusMessage: "hibernated", ReleaseLease: true})
		if got := c.listStatus(id); got != "hibernated" {
			t.Errorf("list status = %q, want hibernated", got)
		}
		doneLine(c.mustRun("resource", "hibernate", id), "already hibernated: `berth resource wake "+id+"` brings it back")

		var report capacityJSON
		decodeOne(t, c.mustRun("capacity", "-o", "json"), &report)
		if want := []hibernatedJSON{{Provisioner: "pool", Resources: 1}}; !slices.Equal(report.Hibernated, want) {
			t.Errorf("capacity -o json hibernated = %+v, want %+v", report.Hibernated, want)
		}
		if table := c.mustRun("capacity"); !regexp.MustCompile(`(?m)^HIBERNATED \(holding no capacity\)\npool\s+hibernated: 1$`).MatchString(table) {
			t.Errorf("capacity table does not count the hibernated resource:\n%s", table)
		}

		doneLine(c.mustRun("resource", "wake", id), "wake requested: the agent brings it back with its data; it shows ready when done")
		if got := c.listStatus(id); got != "hibernated (wake requested)" {
			t.Errorf("list status = %q, want hibernated (wake requested)", got)
		}
		doneLine(c.mustRun("resource", "wake", id), "wake already requested: it shows ready once the agent has brought it back")
		c.makeReady(id)
		doneLine(c.mustRun("resource", "wake", id), "not hibernated: nothing to wake")

		doneLine(c.mustRun("resource", "label", id, "tier=prod", "team-", "env=eu"),
			"labels now env=eu, tier=prod (generation 2): the agent relabels what it made for it")
		doneLine(c.mustRun("resource", "label", id, "tier=prod"), "labels unchanged: env=eu, tier=prod")
		obj := decodeResource(t, c.mustRun("resource", "get", id, "-o", "json"))
		if labels, _ := obj["labels"].(map[string]any); !maps.Equal(labels, map[string]any{"env": "eu", "tier": "prod"}) {
			t.Errorf("labels = %v", obj["labels"])
		}
		if got := c.mustRun("resource", "get", id); !regexp.MustCompile(`(?m)^labels:\s+env=eu, tier=prod$`).MatchString(got) {
			t.Errorf("get shows no labels:\n%s", got)
		}

		doneLine(c.mustRun("resource", "retry", id), "retry requested: backoff and last error cleared, the agent reconciles it at once")
		if r := c.get(id); r.RetryRequestedAt == nil {
			t.Errorf("retry did not stamp retry_requested_at: %+v", r)
		}

		want := []string{"paused", "resumed", "hibernate requested", "wake requested", "labels changed: env=eu, tier=prod", "retry requested"}
		if got := c.controlEvents(id); !slices.Equal(got, want) {
			t.Errorf("control events = %q,\nwant %q (a control that changes nothing records nothing)", got, want)
		}

		// A control that makes no sense is refused with the store's reason and changes nothing.
		c.mustRun("resource", "delete", id)
		out, _, err := c.run("resource", "hibernate", id)
		if !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "being deleted") || out != "" {
			t.Errorf("hibernate of a resource being deleted: %q, %v; want it refused as being deleted", out, err)
		}
		if r := c.get(id); r.Hibernate {
			t.Error("a refused hibernate changed the row")
		}
	})
}

func TestListSelectsByLabels(t *testing.T) {
	onEachStore(t, func(t *testing.T, c *storeCLI) {
		prodData := c.create("a", "--label", "team=data", "--label", "tier=prod")
		devData := c.create("b", "--label", "team=data", "--label", "tier=dev")
		web := c.create("c", "--label", "team=web")
		bare := c.create("d")
		listIDs := func(selector string) []string {
			t.Helper()
			var list []map[string]any
			decodeOne(t, c.mustRun("resource", "list", "-l", selector, "-o", "json"), &list)
			ids := []string{}
			for _, r := range list {
				ids = append(ids, r["id"].(string))
			}
			return ids
		}
		for _, tt := range []struct {
			selector string
			want     []string
		}{
			{"team=data", []string{prodData, devData}},
			{"team=data,tier!=dev", []string{prodData}},
			{"tier in (dev,prod)", []string{prodData, devData}},
			{"!team", []string{bare}},
			{"team", []string{prodData, devData, web}},
			{"", []string{prodData, devData, web, bare}},
		} {
			if got := listIDs(tt.selector); !slices.Equal(got, tt.want) {
				t.Errorf("list -l %q = %v, want %v", tt.selector, got, tt.want)
			}
		}
		if out := c.mustRun("resource", "list", "--selector", "team=web"); !strings.Contains(out, web) || strings.Contains(out, prodData) {
			t.Errorf("list --selector team=web:\n%s", out)
		}
	})
}

func TestRetryAllFailedAndBySelector(t *testing.T) {
	onEachStore(t, func(t *testing.T, c *storeCLI) {
		permanent := c.create("permanent", "--label", "team=data")
		backingOff := c.create("backing-off", "--label", "team=web")
		ready := c.create("ready", "--label", "team=data")
		c.record(permanent, domain.ProgressUpdate{Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "unknown provisioner \"gone\"",
			Attempts: 1, LastError: "unknown provisioner \"gone\"", ReleaseLease: true})
		c.record(backingOff, domain.ProgressUpdate{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "attempt 3 failed: host down",
			Attempts: 3, LastError: "host down", RetryIn: 10 * time.Minute, ReleaseLease: true})
		c.makeReady(ready)

		retried := func(out string) []string {
			t.Helper()
			var ids []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				id, _, _ := strings.Cut(strings.TrimPrefix(line, "resource "), " ")
				if !strings.HasSuffix(line, "retry requested: backoff and last error cleared, the agent reconciles it at once") {
					t.Errorf("retry line %q", line)
				}
				ids = append(ids, id)
			}
			return ids
		}
		if got := retried(c.mustRun("resource", "retry", "--all-failed", "-l", "team=data")); !slices.Equal(got, []string{permanent}) {
			t.Errorf("retry --all-failed -l team=data retried %v, want only %s", got, permanent)
		}
		if r := c.get(permanent); r.Attempts != 0 || r.LastError != "" || r.NextAttemptAt != nil || r.RetryRequestedAt == nil {
			t.Errorf("after retry: attempts %d, last error %q, next attempt %v, retry requested %v; want all cleared and the retry stamped",
				r.Attempts, r.LastError, r.NextAttemptAt, r.RetryRequestedAt)
		}
		if r := c.get(backingOff); r.Attempts != 3 || r.RetryRequestedAt != nil {
			t.Errorf("the selector's retry reached %s: %+v", backingOff, r)
		}
		// The permanent failure is still in error until an agent looks at it again; here it
		// succeeds.
		c.makeReady(permanent)
		if got := retried(c.mustRun("resource", "retry", "--all-failed")); !slices.Equal(got, []string{backingOff}) {
			t.Errorf("retry --all-failed retried %v, want only %s (the other is no longer failed)", got, backingOff)
		}
		if r := c.get(backingOff); r.Attempts != 0 || r.NextAttemptAt != nil {
			t.Errorf("backoff not cleared: %+v", r)
		}
		if got := retried(c.mustRun("resource", "retry", "-l", "team=data")); !slices.Equal(got, []string{permanent, ready}) {
			t.Errorf("retry -l team=data retried %v, want %s and %s", got, permanent, ready)
		}
		if out := c.mustRun("resource", "retry", "--all-failed"); out != "nothing to retry: no resource is in error or backing off\n" {
			t.Errorf("retry --all-failed with nothing failed: %q", out)
		}
		if out := c.mustRun("resource", "retry", "-l", "team=none"); out != "nothing to retry: no resource matches the selector\n" {
			t.Errorf("retry -l matching nothing: %q", out)
		}
		var list []map[string]any
		decodeOne(t, c.mustRun("resource", "retry", "-l", "team=web", "-o", "json"), &list)
		if len(list) != 1 || list[0]["id"] != backingOff {
			t.Errorf("retry -l team=web -o json = %v", list)
		}
	})
}

func TestControlsBadInputNamesTheFix(t *testing.T) {
	c := newCLI(t)
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "web", "--label", "team=data", "-o", "json"))["id"].(string)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"resource", "retry"}, "berth resource retry needs a resource: give its ID or name, --all-failed (every resource in error or backing off) or -l SELECTOR (e.g. -l team=data)"},
		{[]string{"resource", "retry", id, "--all-failed"}, "give a resource ID or name, or --all-failed / -l SELECTOR, not both"},
		{[]string{"resource", "retry", id, id}, "takes one resource ID or name, got 2 arguments"},
		{[]string{"resource", "retry", "-l", "team in (a"}, `-l/--selector "team in (a": `},
		{[]string{"resource", "retry", "-l", "team in (a"}, "write it as key=value, key!=value, key in (a,b), key or !key, joined by commas"},
		{[]string{"resource", "list", "-l", "a b"}, `-l/--selector "a b": `},
		{[]string{"resource", "pause"}, "berth resource pause needs exactly one resource ID or name"},
		{[]string{"resource", "wake", "nope"}, `resource "nope": no resource has this name`},
		{[]string{"resource", "label", id}, "needs a resource ID or name and at least one label: KEY=VALUE to set it, KEY- to remove it"},
		{[]string{"resource", "label", id, "team"}, `label "team": write KEY=VALUE to set a label or KEY- to remove it (e.g. team=data, tier-)`},
		{[]string{"resource", "label", id, "-"}, `label "-": write KEY- to remove the label KEY`},
		{[]string{"resource", "label", id, "a=1", "a=2"}, `label "a=2": a is set twice`},
		{[]string{"resource", "label", id, "berth.dev/team=x"}, `labels: key "berth.dev/team" has a prefix: label keys are plain names`},
		{[]string{"resource", "label", id, "team=data science"}, `labels: value "data science" of "team" is not a label value`},
		{[]string{"resource", "label", id, "tier-"}, `labels: the resource has no label "tier" (its labels: team)`},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--label", "team"}, `--label: "team" is not KEY=VALUE: write e.g. --label team=data`},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--label", "a=1", "--label", "a=2"}, "--label: a is given twice"},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--label", "-x=1"}, `--label: key "-x" is not a label key`},
		{[]string{"resource", "describe", id, "-o", "json"}, "-o/--output: describe prints text only: use `berth resource get " + id + " -o json`"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, _, err := c.run(tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
			if out != "" {
				t.Errorf("a failed command printed %q", out)
			}
		})
	}
	rs, err := c.st.ListResources(context.Background(), domain.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Generation != 1 || !maps.Equal(rs[0].Labels, map[string]string{"team": "data"}) {
		t.Errorf("bad input changed the table: %+v", rs)
	}
}

func TestConditionsInJSON(t *testing.T) {
	onEachStore(t, func(t *testing.T, c *storeCLI) {
		id := c.create("web")
		conditions := func(out string) map[string]conditionJSON {
			t.Helper()
			var raw struct {
				Conditions []map[string]any `json:"conditions"`
			}
			if err := json.Unmarshal([]byte(out), &raw); err != nil {
				t.Fatal(err)
			}
			for _, cond := range raw.Conditions {
				keys := slices.Sorted(maps.Keys(cond))
				if want := []string{"lastTransitionTime", "message", "observedGeneration", "reason", "status", "type"}; !slices.Equal(keys, want) {
					t.Errorf("condition keys = %v, want %v", keys, want)
				}
			}
			var typed struct {
				Conditions []conditionJSON `json:"conditions"`
			}
			if err := json.Unmarshal([]byte(out), &typed); err != nil {
				t.Fatal(err)
			}
			byType := map[string]conditionJSON{}
			for _, cond := range typed.Conditions {
				byType[cond.Type] = cond
			}
			if len(typed.Conditions) != 2 || len(byType) != 2 {
				t.Errorf("conditions = %+v, want Ready and Synced", typed.Conditions)
			}
			return byType
		}
		got := conditions(c.mustRun("resource", "get", id, "-o", "json"))
		if r, s := got["Ready"], got["Synced"]; r.Status != "False" || r.Reason != "Pending" || s.Status != "False" || s.Reason != "ReconcilePending" ||
			r.LastTransitionTime.IsZero() || r.ObservedGeneration != 0 {
			t.Errorf("conditions of a new resource = %+v", got)
		}
		c.makeReady(id)
		var list []json.RawMessage
		decodeOne(t, c.mustRun("resource", "list", "-o", "json"), &list)
		got = conditions(string(list[0]))
		changed := c.get(id).StatusChangedAt.UTC()
		if r, s := got["Ready"], got["Synced"]; r.Status != "True" || r.Reason != "Ready" || r.Message != "ready at generation 1" ||
			s.Status != "True" || s.Reason != "ReconcileSuccess" || r.ObservedGeneration != 1 || !r.LastTransitionTime.Equal(changed) {
			t.Errorf("conditions of a ready resource = %+v (status changed at %v)", got, changed)
		}
		c.mustRun("resource", "pause", id)
		if s := conditions(c.mustRun("resource", "get", id, "-o", "json"))["Synced"]; s.Status != "False" || s.Reason != "Paused" {
			t.Errorf("Synced of a paused resource = %+v", s)
		}
	})
}
