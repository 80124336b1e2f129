package e2e_test

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/e2etest"
)

// TestOutputFlags runs kubectl's output habits through the built binary: -o name for a
// shell loop, -o jsonpath for one field of each resource, --sort-by a JSONPath with numbers
// sorted as numbers, --no-headers, and -o wide's extra columns. No agent is needed: the
// resources stay pending.
func TestOutputFlags(t *testing.T) {
	e := newEnvOn(t, e2etest.SQLite, map[string]int{"a": 4})
	ten := e.create("--name", "ten", "--owner", "demo", "--arg", "slots=10", "--label", "team=data")
	two := e.create("--name", "two", "--owner", "demo", "--arg", "slots=2")
	e.create("--name", "three", "--owner", "demo", "--arg", "slots=3")

	if got := e.berth("resource", "list", "-o", "name"); got != "runtime/ten\nruntime/two\nruntime/three\n" {
		t.Errorf("list -o name printed %q, want TYPE/NAME oldest first", got)
	}
	if got := e.berth("resource", "list", "--sort-by", ".args.slots", "-o", "name"); got != "runtime/two\nruntime/three\nruntime/ten\n" {
		t.Errorf("list --sort-by .args.slots printed %q, want 2, 3, 10 (as numbers)", got)
	}
	got := e.berth("resource", "list", "-o", `jsonpath={range [*]}{.id} {.args.slots}{"\n"}{end}`)
	if !strings.HasPrefix(got, ten+" 10\n"+two+" 2\n") || strings.Count(got, "\n") != 3 {
		t.Errorf("list -o jsonpath printed %q, want each id and its slots", got)
	}
	if got := e.berth("resource", "get", two, "-o", "jsonpath={.name}/{.owner}"); got != "two/demo" {
		t.Errorf("get -o jsonpath printed %q, want two/demo", got)
	}
	rows := strings.Split(strings.TrimSpace(e.berth("resource", "list", "--no-headers", "--sort-by", "{.name}", "--show-labels")), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], ten) || !strings.Contains(rows[0], "team=data") || !strings.Contains(rows[1], "<none>") {
		t.Errorf("list --no-headers --sort-by {.name} --show-labels printed\n%s", strings.Join(rows, "\n"))
	}
	if wide := e.berth("resource", "list", "-o", "wide"); !strings.Contains(wide, "REASON") || !strings.Contains(wide, "Created") {
		t.Errorf("list -o wide printed\n%s\nwant the REASON column with pending's reason", wide)
	}
	if _, _, err := e.tryBerth("resource", "list", "-o", "nosuch"); err == nil {
		t.Error("list -o nosuch succeeded")
	}
}
