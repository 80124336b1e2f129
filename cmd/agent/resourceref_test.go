package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// TestResourceByName: the commands on one resource take its name, narrowed by --owner and
// --type where several resources use it, as well as its ID.
func TestResourceByName(t *testing.T) {
	c := newCLI(t)
	create := func(args ...string) string {
		return decodeResource(t, c.mustRun(append([]string{"resource", "create", "-o", "json"}, args...)...))["id"].(string)
	}
	demo := create("--type", "runtime", "--name", "hello", "--owner", "demo")
	other := create("--type", "runtime", "--name", "Hello", "--owner", "other")
	solo := create("--type", "clickhouse", "--name", "solo", "--owner", "demo")

	idOf := func(args ...string) string {
		t.Helper()
		return decodeResource(t, c.mustRun(append([]string{"resource", "get", "-o", "json"}, args...)...))["id"].(string)
	}
	if got := idOf("solo"); got != solo {
		t.Errorf("get solo = %s, want %s", got, solo)
	}
	if got := idOf("HELLO", "--owner", "demo"); got != demo {
		t.Errorf("get HELLO --owner demo = %s, want %s (names ignore case)", got, demo)
	}
	if got := idOf("hello", "--owner", "other", "--type", "runtime"); got != other {
		t.Errorf("get hello --owner other = %s, want %s", got, other)
	}
	if got := idOf(demo, "--owner", "demo"); got != demo {
		t.Errorf("get ID with its owner = %s, want %s", got, demo)
	}

	for _, tt := range []struct {
		args     []string
		want     []string
		notFound bool
	}{
		{[]string{"get", "hello"}, []string{`resource "hello": 2 resources have this name`, demo, other, "--owner and --type"}, false},
		{[]string{"get", "hello", "--owner", "nobody"}, []string{`no resource of owner "nobody" has this name`, "resource ids are UUIDs"}, true},
		{[]string{"get", "solo", "--type", "runtime"}, []string{"of type runtime has this name"}, true},
		{[]string{"get", "hello", "--owner", ""}, []string{`of owner ""`}, true},
		{[]string{"get", demo, "--owner", "other"}, []string{"--owner/--type: resource " + demo + ` is a runtime of owner "demo"`}, false},
		{[]string{"get", "solo", "--type", "vm"}, []string{`--type: "vm" is not a resource type`}, false},
		{[]string{"delete", "hello"}, []string{"2 resources have this name"}, false},
		{[]string{"events", "nope"}, []string{`resource "nope": no resource has this name`}, true},
	} {
		_, _, err := c.run(append([]string{"resource"}, tt.args...)...)
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("resource %v: %v, want %q", tt.args, err, w)
			}
		}
		if got := errors.Is(err, domain.ErrNotFound); got != tt.notFound {
			t.Errorf("resource %v: errors.Is(ErrNotFound) = %v, want %v", tt.args, got, tt.notFound)
		}
	}

	if got := decodeResource(t, c.mustRun("resource", "update", "hello", "--owner", "demo", "--arg", "slots=3", "-o", "json")); got["id"] != demo || got["args"].(map[string]any)["slots"] != json.Number("3") {
		t.Errorf("update by name changed %v", got)
	}
	if events := c.mustRun("resource", "events", "solo"); !strings.Contains(events, "pending") {
		t.Errorf("events by name:\n%s", events)
	}
	if got := decodeResource(t, c.mustRun("resource", "delete", "hello", "--owner", "other", "-o", "json")); got["id"] != other || got["status"] != "deleting" {
		t.Errorf("delete by name: %v", got)
	}
	if got := decodeResource(t, c.mustRun("resource", "get", demo, "-o", "json")); got["status"] != "pending" {
		t.Errorf("deleting the other hello touched %v", got)
	}
}

// TestCreateWaitPrintsHostAndConfig: in table form a ready resource's host and config come
// between the summary and the id, which stays the last line.
func TestCreateWaitPrintsHostAndConfig(t *testing.T) {
	c := newCLI(t)
	done := c.runAsync("resource", "create", "--type", "runtime", "--name", "w", "--owner", "acme", "--wait")
	if err := c.clk.WaitAdvance(0, waitLimit, 2); err != nil {
		t.Fatal(err)
	}
	rs, err := c.st.ListResources(t.Context(), domain.ListFilter{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("resources: %v, %v", rs, err)
	}
	one := int64(1)
	c.record(rs[0].ID, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &one,
		Config: map[string]any{"audience": "http://a", "cpu": 2, "host": "http://h1:9091"}})
	// The command returns on the resource's event, without the clock moving.
	res := awaitResult(t, done)
	if res.err != nil {
		t.Fatalf("create --wait: %v", res.err)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	want := []string{
		`created runtime "w" for owner "acme" (status ready`,
		"  host:      http://h1:9091",
		"  audience:  http://a",
		"  cpu:       2",
		rs[0].ID,
	}
	if len(lines) != len(want) {
		t.Fatalf("create --wait printed:\n%s", res.stdout)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
}
