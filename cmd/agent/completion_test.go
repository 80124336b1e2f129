package main

import (
	"strings"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
)

// Each shell's completion script is generated.
func TestCompletionScripts(t *testing.T) {
	clearEnv(t)
	for shell, want := range map[string]string{
		"bash": "__start_berth",
		"zsh":  "#compdef berth",
		"fish": "complete -c berth",
	} {
		out, _, err := runBerth(testclock.NewClock(time.Now()), "completion", shell)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("completion %s: %v; the script lacks %q:\n%.300s", shell, err, want, out)
		}
	}
}

// completions runs the shell's completion request for args (the last one is the word being
// completed) and returns the candidates, each "value<TAB>description".
func (c *cli) completions(args ...string) []string {
	c.t.Helper()
	words := append([]string{"__complete", "--database-url", c.url}, args...)
	out, _, err := runBerth(c.clk, words...)
	if err != nil {
		c.t.Fatalf("__complete %s: %v", strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		c.t.Fatalf("__complete %s printed no directive:\n%s", strings.Join(args, " "), out)
	}
	return lines[:len(lines)-1]
}

// The commands taking a resource complete its id (described by its name) from the database,
// and its name once letters are typed; flags complete their values.
func TestCompletionOfResourcesAndFlags(t *testing.T) {
	c := newCLI(t)
	a := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "analytics", "--owner", "acme", "-o", "json"))["id"].(string)
	b := decodeResource(t, c.mustRun("resource", "create", "--type", "clickhouse", "--name", "events", "--owner", "beta", "-o", "json"))["id"].(string)

	for _, command := range []string{"get", "update", "delete", "events"} {
		got := c.completions("resource", command, "")
		want := []string{
			a + "\tanalytics (runtime of owner \"acme\", pending)",
			b + "\tevents (clickhouse of owner \"beta\", pending)",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("__complete resource %s \"\" = %q, want %q", command, got, want)
		}
	}
	if got := c.completions("resource", "get", "--owner", "beta", ""); len(got) != 1 || !strings.HasPrefix(got[0], b+"\t") {
		t.Errorf("completion narrowed by --owner = %q, want %s alone", got, b)
	}
	if got := c.completions("resource", "get", "Ana"); len(got) != 1 || !strings.HasPrefix(got[0], "analytics\t") {
		t.Errorf("completion of a name = %q, want analytics", got)
	}
	if got := c.completions("resource", "get", a, ""); len(got) != 0 {
		t.Errorf("completion after the ID = %q, want none", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resource", "list", "-o", ""}, "table json yaml wide name jsonpath="},
		{[]string{"resource", "list", "--type", ""}, "runtime clickhouse postgres"},
		{[]string{"resource", "list", "--owner", ""}, "acme beta"},
		{[]string{"version", "--log-level", ""}, "debug info warn error"},
	} {
		if got := strings.Join(c.completions(tc.args...), " "); got != tc.want {
			t.Errorf("__complete %s = %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}
