package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/domain"
)

// streamOut collects what a running command prints and says when it printed more.
type streamOut struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (s *streamOut) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return s.buf.Write(p)
}

func (s *streamOut) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until what was printed satisfies ok, and returns it.
func (s *streamOut) waitFor(t *testing.T, what string, ok func(string) bool) string {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		out := s.String()
		if ok(out) {
			return out
		}
		select {
		case <-s.wrote:
		case <-limit:
			t.Fatalf("the watch did not print %s; it printed:\n%s", what, out)
		}
	}
}

// lines waits for the watch to have printed n lines and returns them.
func (s *streamOut) lines(t *testing.T, n int) []string {
	t.Helper()
	out := s.waitFor(t, "enough lines", func(out string) bool { return strings.Count(out, "\n") >= n })
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// startWatch runs a watching command until ctx ends (or the command does); the channel
// gives its error.
func (c *cli) startWatch(ctx context.Context, url string, args ...string) (*streamOut, <-chan error) {
	out := &streamOut{wrote: make(chan struct{}, 1)}
	cmd := newRootCommandWith(&globalOptions{clock: c.clk, pollInterval: time.Second})
	cmd.SetArgs(append(args, "--database-url", url))
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	cmd.SetIn(strings.NewReader(""))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	return out, done
}

func awaitEnd(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitLimit):
		t.Fatal("the watch did not end")
		return nil
	}
}

// A list watch prints the table, then a row per change of the resources its filters
// match (of their status, from the history, and of their args, from the change log), lined
// up with the table, as the changes are recorded (the clock never moves); Ctrl-C ends it
// cleanly.
func TestListWatchPrintsEachChangeAsItHappens(t *testing.T) {
	c := newCLI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "a", "--owner", "acme", "-o", "json"))["id"].(string)
	other := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "o", "--owner", "else", "-o", "json"))["id"].(string)

	out, done := c.startWatch(ctx, c.url, "resource", "list", "--owner", "acme", "--watch")
	lines := out.lines(t, 2)
	if !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], a) || !strings.Contains(lines[1], "pending") {
		t.Fatalf("the watch did not start with the table:\n%s", out.String())
	}
	one := int64(1)
	c.record(a, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &one})
	lines = out.lines(t, 3)
	if !strings.HasPrefix(lines[2], a) || strings.Index(lines[2], "ready") != strings.Index(lines[0], "STATUS") {
		t.Fatalf("want a ready, in the STATUS column:\n%s", out.String())
	}
	b := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "b", "--owner", "acme", "-o", "json"))["id"].(string)
	lines = out.lines(t, 4)
	if !strings.HasPrefix(lines[3], b) || !strings.Contains(lines[3], "pending") {
		t.Fatalf("want the new resource b:\n%s", out.String())
	}
	c.mustRun("resource", "update", b, "--arg", "slots=3") // in the change log, not the history
	lines = out.lines(t, 5)
	if !strings.HasPrefix(lines[4], b) || !strings.Contains(lines[4], "slots=3") {
		t.Fatalf("want b's new args:\n%s", out.String())
	}
	c.record(other, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &one})
	c.mustRun("resource", "delete", a)
	lines = out.lines(t, 6)
	if !strings.HasPrefix(lines[5], a) || !strings.Contains(lines[5], "deleting") {
		t.Fatalf("want a deleting (and nothing of the other owner's resource before it):\n%s", out.String())
	}
	claim, err := c.st.ClaimResource(ctx, a, "test-agent", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.st.FinalizeDelete(ctx, a, claim.Lease); err != nil {
		t.Fatal(err)
	}
	lines = out.lines(t, 7)
	if !strings.HasPrefix(lines[6], a) || strings.Index(lines[6], "deleted") != strings.Index(lines[0], "STATUS") {
		t.Fatalf("want a deleted:\n%s", out.String())
	}
	cancel()
	if err := awaitEnd(t, done); err != nil {
		t.Errorf("the watch ended with %v, want nil on Ctrl-C", err)
	}
	if got := out.String(); strings.Count(got, "\n") != 7 || strings.Contains(got, other) {
		t.Errorf("the watch printed more than the changes of acme's resources:\n%s", got)
	}
}

// A watch of one resource in JSON prints one object per change, the last with status
// deleted, and ends by itself once the resource is removed.
func TestGetWatchJSONEndsWithTheRemoval(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "g", "-o", "json"))["id"].(string)
	out, done := c.startWatch(ctx, c.url, "resource", "get", "g", "--watch", "-o", "json")
	statusCount := func(status string) func(string) bool {
		return func(out string) bool { return strings.Contains(out, `"status": "`+status+`"`) }
	}
	out.waitFor(t, "the resource pending", statusCount("pending"))
	one := int64(1)
	c.record(id, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &one})
	out.waitFor(t, "the resource ready", statusCount("ready"))
	c.mustRun("resource", "delete", id)
	out.waitFor(t, "the resource deleting", statusCount("deleting"))
	claim, err := c.st.ClaimResource(ctx, id, "test-agent", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.st.FinalizeDelete(ctx, id, claim.Lease); err != nil {
		t.Fatal(err)
	}
	if err := awaitEnd(t, done); err != nil {
		t.Fatalf("the watch ended with %v, want nil after the removal", err)
	}
	dec := json.NewDecoder(strings.NewReader(out.String()))
	dec.UseNumber()
	var statuses []string
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("the watch printed no stream of JSON objects: %v\n%s", err, out.String())
		}
		checkKeys(t, obj)
		if obj["id"] != id {
			t.Errorf("object of %v, want %s", obj["id"], id)
		}
		statuses = append(statuses, obj["status"].(string))
	}
	if got, want := strings.Join(statuses, " "), "pending ready deleting deleted"; got != want {
		t.Errorf("statuses printed = %s, want %s", got, want)
	}
}

// On the embedded SQLite database a list watch in YAML prints one document per resource and
// change, each starting with ---.
func TestListWatchYAMLOnSQLite(t *testing.T) {
	c := newCLI(t)
	url := "sqlite://" + filepath.Join(t.TempDir(), "berth.db")
	lite := func(args ...string) {
		t.Helper()
		if _, errOut, err := runBerth(c.clk, append(args, "--database-url", url)...); err != nil {
			t.Fatalf("berth %s: %v (stderr %q)", strings.Join(args, " "), err, errOut)
		}
	}
	lite("migrate")
	lite("resource", "create", "--type", "runtime", "--name", "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, done := c.startWatch(ctx, url, "resource", "list", "--watch", "-o", "yaml")
	out.waitFor(t, "the first document", func(out string) bool { return strings.Contains(out, "name: a\n") })
	lite("resource", "create", "--type", "runtime", "--name", "b")
	out.waitFor(t, "the new resource", func(out string) bool { return strings.Contains(out, "name: b\n") })
	lite("resource", "delete", "b")
	out.waitFor(t, "b deleting", func(out string) bool { return strings.Contains(out, "status: deleting\n") })
	cancel()
	if err := awaitEnd(t, done); err != nil {
		t.Errorf("the watch ended with %v", err)
	}
	docs := strings.Split(out.String(), "---\n")
	if docs[0] != "" {
		t.Fatalf("the first document does not start with ---:\n%s", out.String())
	}
	var got []string
	for _, doc := range docs[1:] {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("not a YAML document: %v\n%s", err, doc)
		}
		got = append(got, obj["name"].(string)+" "+obj["status"].(string))
	}
	if want := "a pending,b pending,b deleting"; strings.Join(got, ",") != want {
		t.Errorf("documents = %q, want %s", got, want)
	}
}
