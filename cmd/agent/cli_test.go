package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock"
	"github.com/juju/clock/testclock"
	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/internal/pgtest"
)

// resourceKeys are exactly the keys -o json prints for a resource.
var resourceKeys = []string{"args", "conditions", "config", "created_at", "generation", "hibernate", "id", "labels", "last_attempt_at", "name", "observed_generation", "owner", "paused", "provisioner", "reason", "status", "status_message", "type", "updated_at", "waiting_since"}

const waitLimit = 10 * time.Second // how long a test waits for the command to reach the clock

// clearEnv keeps the caller's environment out of the command under test.
func clearEnv(t *testing.T) {
	for _, v := range []string{envDatabaseURL, envProvisionerSetJSON, envDefaultProvisioner, envLogLevel} {
		t.Setenv(v, "")
	}
	// Where the default SQLite database goes: the test's own directory, never the user's.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
}

// runBerth runs the command tree in-process, as main would, and returns what it printed.
func runBerth(clk clock.Clock, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := newRootCommandWith(&globalOptions{clock: clk, pollInterval: time.Second})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(""))
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// cli runs commands against a migrated test database.
type cli struct {
	t   *testing.T
	url string
	clk *testclock.Clock
	st  *postgres.State
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	clearEnv(t)
	url := pgtest.New(t)
	st, err := postgres.Open(context.Background(), url, postgres.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &cli{t: t, url: url, clk: testclock.NewClock(time.Now()), st: st}
}

func (c *cli) run(args ...string) (string, string, error) {
	return runBerth(c.clk, append(args, "--database-url", c.url)...)
}

func (c *cli) mustRun(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("berth %s: %v (stderr %q)", strings.Join(args, " "), err, errOut)
	}
	return out
}

// runAsync runs a command that waits on the clock; the returned channel gives its result.
func (c *cli) runAsync(args ...string) <-chan cmdResult {
	done := make(chan cmdResult, 1)
	go func() {
		out, _, err := c.run(args...)
		done <- cmdResult{out, err}
	}()
	return done
}

type cmdResult struct {
	stdout string
	err    error
}

// awaitResult returns the result of a command run with runAsync, failing the test when it
// does not come (a wait that needs the clock to move, or is stuck).
func awaitResult(t *testing.T, done <-chan cmdResult) cmdResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(waitLimit):
		t.Fatal("the command did not return")
		return cmdResult{}
	}
}

// decodeOne decodes out as exactly one JSON value, keeping numbers as json.Number.
func decodeOne(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("output holds more than one JSON value:\n%s", out)
	}
}

// decodeResource checks out is one resource object with exactly the documented keys.
func decodeResource(t *testing.T, out string) map[string]any {
	t.Helper()
	var obj map[string]any
	decodeOne(t, out, &obj)
	checkKeys(t, obj)
	return obj
}

func checkKeys(t *testing.T, obj map[string]any) {
	t.Helper()
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, resourceKeys) {
		t.Fatalf("keys = %v, want %v", keys, resourceKeys)
	}
}

func (c *cli) record(id string, u domain.ProgressUpdate) {
	c.t.Helper()
	ctx := context.Background()
	claim, err := c.st.ClaimResource(ctx, id, "test-agent", time.Minute)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.st.RecordProgress(ctx, id, claim.Lease, u); err != nil {
		c.t.Fatal(err)
	}
}

func TestResourceLifecycleJSON(t *testing.T) {
	c := newCLI(t)
	obj := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "analytics", "--owner", "acme",
		"--arg", "slots=2", "--arg", "version=1.4.0", "-o", "json"))
	id, _ := obj["id"].(string)
	if id == "" || obj["status"] != "pending" || obj["generation"] != json.Number("1") || obj["observed_generation"] != json.Number("0") {
		t.Fatalf("created resource: %v", obj)
	}
	wantArgs := map[string]any{"slots": json.Number("2"), "version": "1.4.0"}
	if !reflect.DeepEqual(obj["args"], wantArgs) {
		t.Errorf("args = %#v, want %#v (slots a JSON number)", obj["args"], wantArgs)
	}
	if !reflect.DeepEqual(obj["config"], map[string]any{}) {
		t.Errorf("config = %#v, want {}", obj["config"])
	}

	got := decodeResource(t, c.mustRun("resource", "get", id, "-o", "json"))
	if !reflect.DeepEqual(got, obj) {
		t.Errorf("get = %v, want what create printed %v", got, obj)
	}

	// update merges: version stays.
	got = decodeResource(t, c.mustRun("resource", "update", id, "--arg", "slots=4", "-o", "json"))
	if want := map[string]any{"slots": json.Number("4"), "version": "1.4.0"}; !reflect.DeepEqual(got["args"], want) || got["generation"] != json.Number("2") {
		t.Errorf("after update --arg slots=4: args %v generation %v", got["args"], got["generation"])
	}
	got = decodeResource(t, c.mustRun("resource", "update", id, "--unset", "version", "-o", "json"))
	if want := map[string]any{"slots": json.Number("4")}; !reflect.DeepEqual(got["args"], want) || got["generation"] != json.Number("3") {
		t.Errorf("after update --unset version: args %v generation %v", got["args"], got["generation"])
	}

	// Table mode: the id is the last line.
	out := c.mustRun("resource", "create", "--type", "clickhouse", "--name", "events", "--owner", "other")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	otherID := lines[len(lines)-1]
	if len(lines) < 2 || !strings.Contains(lines[0], `created clickhouse "events"`) {
		t.Errorf("create table output:\n%s", out)
	}
	if _, err := c.st.GetResource(context.Background(), otherID); err != nil {
		t.Errorf("last line %q of create is not the new id: %v", otherID, err)
	}

	listIDs := func(args ...string) []string {
		t.Helper()
		var list []map[string]any
		decodeOne(t, c.mustRun(append([]string{"resource", "list", "-o", "json"}, args...)...), &list)
		ids := []string{}
		for _, r := range list {
			checkKeys(t, r)
			ids = append(ids, r["id"].(string))
		}
		return ids
	}
	if ids := listIDs(); !slices.Equal(ids, []string{id, otherID}) {
		t.Errorf("list = %v, want both, oldest first", ids)
	}
	if ids := listIDs("--owner", "acme"); !slices.Equal(ids, []string{id}) {
		t.Errorf("list --owner acme = %v", ids)
	}
	if ids := listIDs("--type", "clickhouse"); !slices.Equal(ids, []string{otherID}) {
		t.Errorf("list --type clickhouse = %v", ids)
	}
	if out := c.mustRun("resource", "list", "--status", "ready", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("empty list prints %q, want []", out)
	}

	table := c.mustRun("resource", "list")
	if !strings.HasPrefix(table, "ID ") || !strings.Contains(table, "slots=4") || !strings.Contains(table, "events") {
		t.Errorf("list table:\n%s", table)
	}
	if get := c.mustRun("resource", "get", id); !strings.Contains(get, "args:") || !strings.Contains(get, "slots=4") {
		t.Errorf("get table:\n%s", get)
	}

	got = decodeResource(t, c.mustRun("resource", "delete", id, "-o", "json"))
	if got["status"] != "deleting" {
		t.Errorf("delete printed status %v, want deleting", got["status"])
	}
	if ids := listIDs("--status", "deleting"); !slices.Equal(ids, []string{id}) {
		t.Errorf("list --status deleting = %v", ids)
	}
	_, _, err := c.run("resource", "update", id, "--arg", "slots=1")
	if !errors.Is(err, domain.ErrStale) || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("update of a deleting resource: %v", err)
	}
}

func TestBadInputNamesTheFlag(t *testing.T) {
	c := newCLI(t)
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "dup", "-o", "json"))["id"].(string)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"resource", "create", "--type", "vm", "--name", "x"}, `--type: "vm" is not a resource type: use one of runtime, clickhouse, postgres`},
		{[]string{"resource", "create", "--name", "x"}, "--type is required: use one of runtime, clickhouse, postgres"},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--arg", "slots"}, `--arg: "slots" is not key=value`},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--arg", "cpu=2"}, "--arg cpu: unknown key; known keys: slots, version"},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--arg", "slots=0"}, "--arg slots: must be at least 1"},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--arg", "slots=2147483648"}, "--arg slots: must be at most 1000000, got 2147483648"},
		{[]string{"resource", "create", "--type", "clickhouse", "--name", "x", "--arg", "slots=1"}, "--arg slots: unknown key; it takes no keys"},
		{[]string{"resource", "create", "--type", "runtime"}, "--name: is required"},
		{[]string{"resource", "create", "--type", "runtime", "--name", "a\tb"}, "--name: contains the control character"},
		{[]string{"resource", "create", "--type", "runtime", "--name", "DUP"}, `--name: a runtime named "DUP" already exists for owner ""`},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--wait", "--timeout", "0s"}, "--timeout: must be positive"},
		{[]string{"resource", "create", "--type", "runtime", "--name", "x", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"resource", "list", "--status", "done"}, `--status: "done" is not a status: use one of pending, provisioning, ready, unhealthy, error, deleting`},
		{[]string{"resource", "list", "--type", "vm"}, `--type: "vm" is not a resource type`},
		{[]string{"resource", "list", "-o", "xml"}, `-o/--output: "xml" is not an output format of berth resource list: use one of table, wide, json, yaml, name, jsonpath=TEMPLATE`},
		{[]string{"resource", "get"}, "needs exactly one resource ID"},
		{[]string{"resource", "gte", id}, `unknown command "gte" for "berth resource"`},
		{[]string{"resource", "get", "00000000-0000-0000-0000-000000000000"}, "not found"},
		{[]string{"resource", "get", "not-a-uuid"}, "resource ids are UUIDs"},
		{[]string{"resource", "update", id}, "nothing to update: give --arg key=value, --unset key or --provisioner NAME"},
		{[]string{"resource", "update", id, "--arg", "size=3"}, "--arg size: unknown key"},
		{[]string{"resource", "update", id, "--arg", "slots=1000001"}, "--arg slots: must be at most 1000000, got 1000001"},
		{[]string{"resource", "update", id, "--unset", "verison"}, `--unset: the resource has no arg "verison"`},
	}
	for _, tt := range tests {
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
	if len(rs) != 1 || rs[0].Generation != 1 {
		t.Errorf("bad input changed the table: %+v", rs)
	}
}

func TestResourceCommandsRefuseADatabaseWithoutSchema(t *testing.T) {
	clearEnv(t)
	url := pgtest.New(t)
	clk := testclock.NewClock(time.Now())
	for _, args := range [][]string{
		{"resource", "list"},
		{"resource", "create", "--type", "runtime", "--name", "x"},
		{"resource", "get", "00000000-0000-0000-0000-000000000000"},
	} {
		_, _, err := runBerth(clk, append(args, "--database-url", url)...)
		if err == nil || !strings.Contains(err.Error(), "the database has no Berth schema: run `berth migrate` (or start `berth run`)") {
			t.Errorf("berth %s: %v, want the missing-schema error", strings.Join(args, " "), err)
		}
	}
	for range 2 { // migrate is idempotent
		out, _, err := runBerth(clk, "migrate", "--database-url", url)
		if err != nil || !strings.Contains(out, "is up to date") {
			t.Fatalf("migrate: %q, %v", out, err)
		}
	}
	if _, _, err := runBerth(clk, "resource", "list", "--database-url", url); err != nil {
		t.Errorf("list after migrate: %v", err)
	}
}

func TestCreateWaitReturnsWhenReady(t *testing.T) {
	c := newCLI(t)
	done := c.runAsync("resource", "create", "--type", "runtime", "--name", "w", "--wait", "-o", "json")
	// The first read saw pending; the command now waits on the clock.
	if err := c.clk.WaitAdvance(0, waitLimit, 2); err != nil {
		t.Fatal(err)
	}
	rs, err := c.st.ListResources(context.Background(), domain.ListFilter{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("resources: %v, %v", rs, err)
	}
	one := int64(1)
	c.record(rs[0].ID, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &one,
		Config: map[string]any{"host": "http://h1:9091"}})
	// The command returns on the resource's event, without the clock moving.
	res := awaitResult(t, done)
	if res.err != nil {
		t.Fatalf("create --wait: %v", res.err)
	}
	obj := decodeResource(t, res.stdout)
	if obj["id"] != rs[0].ID || obj["status"] != "ready" || !reflect.DeepEqual(obj["config"], map[string]any{"host": "http://h1:9091"}) {
		t.Errorf("create --wait printed %v", obj)
	}
}

func TestCreateWaitFailsWithTheStatusMessage(t *testing.T) {
	c := newCLI(t)
	done := c.runAsync("resource", "create", "--type", "runtime", "--name", "w", "--wait")
	if err := c.clk.WaitAdvance(0, waitLimit, 2); err != nil {
		t.Fatal(err)
	}
	rs, err := c.st.ListResources(context.Background(), domain.ListFilter{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("resources: %v, %v", rs, err)
	}
	c.record(rs[0].ID, domain.ProgressUpdate{Generation: 1, Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "args.slots: 60 slots do not fit on any host"})
	// The command returns on the resource's event, without the clock moving.
	res := awaitResult(t, done)
	if res.err == nil || !strings.Contains(res.err.Error(), "failed: args.slots: 60 slots do not fit on any host") {
		t.Errorf("create --wait error = %v, want the status message", res.err)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if lines[len(lines)-1] != rs[0].ID {
		t.Errorf("a failed create --wait must still print the id last:\n%s", res.stdout)
	}
}

func TestCreateWaitTimesOutOnTheClock(t *testing.T) {
	c := newCLI(t)
	done := c.runAsync("resource", "create", "--type", "runtime", "--name", "w", "--wait", "--timeout", "3s")
	for range 3 {
		if err := c.clk.WaitAdvance(time.Second, waitLimit, 2); err != nil {
			t.Fatal(err)
		}
	}
	res := <-done
	if res.err == nil || !strings.Contains(res.err.Error(), "--timeout: resource") || !strings.Contains(res.err.Error(), "is not ready after 3s (status pending") {
		t.Errorf("create --wait --timeout 3s: %v", res.err)
	}
}

func TestUpdateWaitIgnoresTheErrorOfTheOldArgs(t *testing.T) {
	c := newCLI(t)
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "u", "--arg", "slots=60", "-o", "json"))["id"].(string)
	c.record(id, domain.ProgressUpdate{Generation: 1, Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "no host has 60 slots"})

	done := c.runAsync("resource", "update", id, "--arg", "slots=2", "--wait", "-o", "json")
	// The first read still shows the old error; the command keeps waiting.
	if err := c.clk.WaitAdvance(0, waitLimit, 2); err != nil {
		t.Fatal(err)
	}
	two := int64(2)
	c.record(id, domain.ProgressUpdate{Generation: 2, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &two})
	// The command returns on the resource's event, without the clock moving.
	res := awaitResult(t, done)
	if res.err != nil {
		t.Fatalf("update --wait: %v", res.err)
	}
	if obj := decodeResource(t, res.stdout); obj["status"] != "ready" || obj["observed_generation"] != json.Number("2") {
		t.Errorf("update --wait printed %v", obj)
	}
}

func TestDeleteWaitReturnsWhenTheRowIsGone(t *testing.T) {
	c := newCLI(t)
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "d", "-o", "json"))["id"].(string)
	done := c.runAsync("resource", "delete", id, "--wait")
	if err := c.clk.WaitAdvance(0, waitLimit, 2); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claim, err := c.st.ClaimResource(ctx, id, "test-agent", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.st.FinalizeDelete(ctx, id, claim.Lease); err != nil {
		t.Fatal(err)
	}
	// The command returns on the resource's event, without the clock moving.
	res := awaitResult(t, done)
	if res.err != nil || !strings.Contains(res.stdout, "deleted") {
		t.Errorf("delete --wait: %q, %v", res.stdout, res.err)
	}
}

// The provisioner set's documented example loads exactly as written, comments and all, from
// a file and from the environment; an error in a set with comments names its line and column.
func TestCheckConfigLoadsTheDocumentedExampleAsWritten(t *testing.T) {
	clearEnv(t)
	clk := testclock.NewClock(time.Now())
	example, err := os.ReadFile("testdata/documented-example.jsonc")
	if err != nil {
		t.Fatal(err)
	}
	templates, err := filepath.Glob("../../environ/kubernetes/templates/*.yaml")
	if err != nil || len(templates) == 0 {
		t.Fatalf("the kubernetes environ's templates: %v, %v", templates, err)
	}
	// The example's kubernetes provisioner names its kubeconfig and templates relative to
	// the working directory.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "templates"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, path := range templates {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "templates", filepath.Base(path)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	for name, content := range map[string]string{"kubeconfig.yaml": kubeconfig, "provisioners.jsonc": string(example)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)

	want := "is valid: 2 provisioner(s), default \"static-example\""
	out, _, err := runBerth(clk, "check-config", "--provisioners", "provisioners.jsonc", "--default-provisioner", "static-example")
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("check-config of the documented example: %q, %v", out, err)
	}
	t.Setenv(envProvisionerSetJSON, string(example))
	out, _, err = runBerth(clk, "check-config", "--default-provisioner", "static-example")
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("check-config of the documented example from the environment: %q, %v", out, err)
	}

	// The example with the slots of its static runtime misspelt: the error is where it is.
	bad := strings.Replace(string(example), `"slots": 50,`, `"slots": "50",`, 1)
	t.Setenv(envProvisionerSetJSON, bad)
	_, _, err = runBerth(clk, "check-config", "--default-provisioner", "static-example")
	if err == nil || !strings.Contains(err.Error(), `provisioner "static-example" (static), line 11, column 26: runtimes[0].slots: must be a whole number, got "50"`) {
		t.Fatalf("check-config of a bad slots value: %v", err)
	}
}

func TestCheckConfig(t *testing.T) {
	clearEnv(t)
	clk := testclock.NewClock(time.Now())
	example, err := os.ReadFile("testdata/static-example.json")
	if err != nil {
		t.Fatal(err)
	}

	out, _, err := runBerth(clk, "check-config", "--provisioners", "testdata/static-example.json")
	if err != nil {
		t.Fatalf("check-config of the example: %v", err)
	}
	if !regexpMatch(`(?m)^static-example\s+static\s+\*`, out) || !strings.Contains(out, "is valid: 1 provisioner(s)") {
		t.Errorf("check-config output:\n%s", out)
	}

	t.Setenv(envProvisionerSetJSON, string(example))
	out, _, err = runBerth(clk, "check-config", "-o", "json")
	if err != nil {
		t.Fatalf("check-config from the environment: %v", err)
	}
	var report struct {
		Source       string              `json:"source"`
		Default      string              `json:"default"`
		Provisioners []provisionerReport `json:"provisioners"`
	}
	decodeOne(t, out, &report)
	want := []provisionerReport{{Name: "static-example", Type: "static", Default: true}}
	if report.Source != envProvisionerSetJSON || report.Default != "static-example" || !reflect.DeepEqual(report.Provisioners, want) {
		t.Errorf("check-config -o json = %+v", report)
	}

	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	dup := write("dup.json", `{"pool": {"type": "static", "spec": {"runtimes": [
		{"host": "http://h1:9091", "slots": 4}, {"host": "HTTP://H1:9091/", "slots": 2}]}}}`)
	two := write("two.json", `{"a": {"type": "static", "spec": {"runtimes": [{"host": "http://h1:9091", "slots": 4}]}},
		"b": {"type": "static", "spec": {"runtimes": [{"host": "http://h2:9091", "slots": 4}]}}}`)

	// The environment's valid set is there in every case below: the flag wins.
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--provisioners", dup}, []string{`provisioner "pool" (static), line 2, column 52: runtimes[1].host: "HTTP://H1:9091/" duplicates runtimes[0].host`}},
		{[]string{"--provisioners", two}, []string{"no default provisioner", "--default-provisioner", "a, b"}},
		{[]string{"--provisioners", two, "--default-provisioner", "c"}, []string{`default provisioner "c" is not in the provisioner set`}},
		{[]string{"--provisioners", filepath.Join(dir, "missing.json")}, []string{"--provisioners: cannot read the provisioner set"}},
		{[]string{"--provisioners", "testdata/static-example.json", "--log-level", "loud"}, []string{`--log-level: "loud" is not a log level`}},
	} {
		_, _, err := runBerth(clk, append([]string{"check-config"}, tt.args...)...)
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("check-config %v: %v, want %q", tt.args, err, w)
			}
		}
	}
	if out, _, err := runBerth(clk, "check-config", "--provisioners", two, "--default-provisioner", "b"); err != nil || !regexpMatch(`(?m)^b\s+static\s+\*`, out) {
		t.Errorf("check-config with a default: %q, %v", out, err)
	}

	t.Setenv(envProvisionerSetJSON, "")
	_, _, err = runBerth(clk, "check-config")
	if err == nil || !strings.Contains(err.Error(), "pass --provisioners FILE or set "+envProvisionerSetJSON) {
		t.Errorf("check-config without a set: %v", err)
	}
}

func TestDatabaseURLPasswordNeverShown(t *testing.T) {
	clearEnv(t)
	clk := testclock.NewClock(time.Now())
	const password = "Sup3rSecretPw"
	url := "postgres://berth:" + password + "@127.0.0.1:1/berth?sslmode=disable"
	commands := [][]string{
		{"migrate"},
		{"resource", "list"},
		{"resource", "create", "--type", "runtime", "--name", "x"},
		{"resource", "get", "00000000-0000-0000-0000-000000000000"},
		{"resource", "delete", "00000000-0000-0000-0000-000000000000"},
	}
	check := func(how string, args []string) {
		t.Helper()
		out, errOut, err := runBerth(clk, args...)
		if err == nil {
			t.Fatalf("%s berth %v: want a connection error", how, args)
		}
		if !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%s berth %v: error %q does not say which database", how, args, err)
		}
		if all := out + errOut + err.Error(); strings.Contains(all, password) {
			t.Errorf("%s berth %v: the password appears in %q", how, args, all)
		}
	}
	for _, args := range commands {
		check("flag:", append(args, "--database-url", url))
	}
	t.Setenv(envDatabaseURL, url)
	for _, args := range commands {
		check("env:", args)
	}
	out, _, err := runBerth(clk, "migrate", "--help")
	if err != nil || !strings.Contains(out, "--database-url") || strings.Contains(out, password) {
		t.Errorf("help with %s set: %v\n%s", envDatabaseURL, err, out)
	}
}

func TestDatabaseFlagBeatsEnvironment(t *testing.T) {
	c := newCLI(t)
	t.Setenv(envDatabaseURL, "postgres://berth@127.0.0.1:1/berth?sslmode=disable")
	if _, _, err := c.run("resource", "list"); err != nil {
		t.Errorf("--database-url should win over %s: %v", envDatabaseURL, err)
	}
	t.Setenv(envDatabaseURL, c.url)
	if _, _, err := runBerth(c.clk, "resource", "list"); err != nil {
		t.Errorf("list with %s only: %v", envDatabaseURL, err)
	}
	// Without either, the commands use the default SQLite file, which migrate creates.
	t.Setenv(envDatabaseURL, "")
	_, _, err := runBerth(c.clk, "resource", "list")
	if err == nil || !strings.Contains(err.Error(), "berth migrate") {
		t.Errorf("list on a new default database: %v, want to be told to migrate", err)
	}
	out, _, err := runBerth(c.clk, "migrate")
	if want := filepath.Join(os.Getenv("XDG_STATE_HOME"), "berth", "berth.db"); err != nil || !strings.Contains(out, want) {
		t.Errorf("migrate without a database URL: %q, %v; want the default file %s named", out, err, want)
	}
	if _, _, err := runBerth(c.clk, "resource", "create", "--type", "runtime", "--name", "local"); err != nil {
		t.Errorf("create on the default database: %v", err)
	}
	if out, _, err := runBerth(c.clk, "resource", "list"); err != nil || !strings.Contains(out, "local") {
		t.Errorf("list on the default database: %q, %v", out, err)
	}
}

func TestLoggerFollowsLevelAndOutput(t *testing.T) {
	var buf bytes.Buffer
	logger, err := (&globalOptions{logLevel: "warn", output: outputJSON}).newLogger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("hidden")
	logger.Warn("shown")
	var line map[string]any
	decodeOne(t, buf.String(), &line)
	if line["msg"] != "shown" || line["level"] != "WARN" {
		t.Errorf("JSON log = %v", line)
	}
	t.Setenv(envLogLevel, "debug")
	opts := &globalOptions{clock: clock.WallClock, pollInterval: time.Second}
	newRootCommandWith(opts)
	if opts.logLevel != "debug" {
		t.Errorf("log level from %s = %q, want debug", envLogLevel, opts.logLevel)
	}
}

func TestVersion(t *testing.T) {
	clearEnv(t)
	out, _, err := runBerth(clock.WallClock, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	decodeOne(t, out, &v)
	if v["version"] != version || v["go"] == "" || v["commit"] == "" {
		t.Errorf("version -o json = %v", v)
	}
}

// TestEveryCommandIsDocumented walks the whole tree a user sees, cobra's help and completion
// commands included: each has a short and a long description and an example that uses it.
func TestEveryCommandIsDocumented(t *testing.T) {
	clearEnv(t)
	var paths []string
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		paths = append(paths, cmd.CommandPath())
		if cmd.Short == "" || cmd.Long == "" || cmd.Example == "" {
			t.Errorf("%q lacks Short, Long or Example", cmd.CommandPath())
		}
		if !strings.Contains(cmd.Example, cmd.CommandPath()) {
			t.Errorf("the example of %q does not use it:\n%s", cmd.CommandPath(), cmd.Example)
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	for _, want := range []string{"berth dev-hosts", "berth help", "berth completion bash", "berth resource events"} {
		if !slices.Contains(paths, want) {
			t.Errorf("the walk missed %q (walked %v)", want, paths)
		}
	}
}

func regexpMatch(pattern, s string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}
