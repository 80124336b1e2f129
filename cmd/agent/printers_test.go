package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
)

var printNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// printedResources are two resources as a list prints them: b is newer, bigger and labelled.
func printedResources() []domain.Resource {
	return []domain.Resource{
		{
			ID: "11111111-1111-1111-1111-111111111111", Type: "runtime", Name: "a", Owner: "acme", Provisioner: "pool",
			Args: map[string]any{"slots": 3}, Generation: 1, ObservedGeneration: 1,
			Status: domain.StatusReady, Reason: domain.ReasonAvailable,
			CreatedAt: printNow.Add(-3 * 24 * time.Hour), UpdatedAt: printNow.Add(-90 * time.Second),
		},
		{
			ID: "22222222-2222-2222-2222-222222222222", Type: "runtime", Name: "b", Owner: "acme", Provisioner: "pool",
			Args: map[string]any{"slots": 10}, Generation: 2, ObservedGeneration: 1, Labels: map[string]string{"team": "data", "tier": "dev"},
			Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity, StatusMessage: "no host has 10 free slots",
			CreatedAt: printNow.Add(-5 * time.Minute), UpdatedAt: printNow.Add(-5 * time.Second),
		},
	}
}

// Each form of the resource list, exactly: the columns, their order and alignment, AGE in
// kubectl's short form from the injected now.
func TestResourceListingPrints(t *testing.T) {
	for _, tt := range []struct {
		output string
		flags  printFlags
		want   string
	}{
		{"table", printFlags{}, `
ID                                    TYPE     NAME  OWNER  PROVISIONER  STATUS   GEN             AGE  ARGS      MESSAGE
11111111-1111-1111-1111-111111111111  runtime  a     acme   pool         ready    1               3d   slots=3   
22222222-2222-2222-2222-222222222222  runtime  b     acme   pool         pending  2 (observed 1)  5m   slots=10  no host has 10 free slots
`},
		{"table", printFlags{noHeaders: true, showLabels: true}, `
11111111-1111-1111-1111-111111111111  runtime  a  acme  pool  ready    1               3d  slots=3   <none>              
22222222-2222-2222-2222-222222222222  runtime  b  acme  pool  pending  2 (observed 1)  5m  slots=10  team=data,tier=dev  no host has 10 free slots
`},
		{"wide", printFlags{}, `
ID                                    TYPE     NAME  OWNER  PROVISIONER  STATUS   REASON              GEN             AGE  UPDATED  ARGS      LABELS              MESSAGE
11111111-1111-1111-1111-111111111111  runtime  a     acme   pool         ready    Available           1               3d   90s      slots=3   <none>              
22222222-2222-2222-2222-222222222222  runtime  b     acme   pool         pending  WaitingForCapacity  2 (observed 1)  5m   5s       slots=10  team=data,tier=dev  no host has 10 free slots
`},
		{"name", printFlags{}, `
runtime/a
runtime/b
`},
		// A key an item lacks prints as nothing, as in kubectl.
		{"jsonpath={range [*]}{.name}:{.unreadable}{\"\\n\"}{end}", printFlags{}, `
a:
b:
`},
		{"jsonpath={range [*]}{.name}={.args.slots} {.created_at}{\"\\n\"}{end}", printFlags{}, `
a=3 2026-11-29T12:00:00Z
b=10 2026-12-02T11:55:00Z
`},
	} {
		opts := &globalOptions{output: tt.output}
		p, err := opts.printerFor(newResourceListCommand(opts), tt.flags, resourceFormats...)
		if err != nil {
			t.Fatalf("-o %s: %v", tt.output, err)
		}
		var out bytes.Buffer
		if err := resourceListing.print(&out, p, printedResources(), printNow); err != nil {
			t.Fatalf("-o %s: %v", tt.output, err)
		}
		if want := strings.TrimPrefix(tt.want, "\n"); out.String() != want {
			t.Errorf("-o %s %+v printed\n%s\nwant\n%s", tt.output, tt.flags, out.String(), want)
		}
	}
}

// The agents and events tables, and their -o wide and -o name forms.
func TestAgentAndEventListingsPrint(t *testing.T) {
	agents := []domain.Agent{{
		ID: "agent-a", Session: 7, Version: "v1.2.3", HTTPAddr: "10.0.0.5:9090", Live: true, Leader: true, LeasesHeld: 2,
		StartedAt: printNow.Add(-26 * time.Hour), HeartbeatAge: 1200 * time.Millisecond, Schema: domain.SchemaVersions{Known: 13, Database: 13},
		Provisioners: []string{"pool", "k8s"},
	}}
	events := []domain.Event{
		{Seq: 41, At: printNow.Add(-10 * time.Minute), Kind: "status", Status: domain.StatusPending, Message: "created"},
		{Seq: 42, At: printNow.Add(-45 * time.Second), Kind: "status", Status: domain.StatusReady, Message: "ready on http://a"},
	}
	for _, tt := range []struct {
		output string
		print  func(p printer, out *bytes.Buffer) error
		want   string
	}{
		{"table", func(p printer, out *bytes.Buffer) error { return agentListing.print(out, p, agents, printNow) }, `
ID       LIVE  LEADER  HEARTBEAT AGE  LEASES  VERSION  HTTP ADDR      SCHEMA   PROVISIONERS  AGE
agent-a  yes   yes     1.2s           2       v1.2.3   10.0.0.5:9090  current  pool,k8s      26h
`},
		{"wide", func(p printer, out *bytes.Buffer) error { return agentListing.print(out, p, agents, printNow) }, `
ID       LIVE  LEADER  HEARTBEAT AGE  LEASES  VERSION  HTTP ADDR      SCHEMA   PROVISIONERS  AGE  STARTED               SESSION
agent-a  yes   yes     1.2s           2       v1.2.3   10.0.0.5:9090  current  pool,k8s      26h  2026-12-01T10:00:00Z  7
`},
		{"name", func(p printer, out *bytes.Buffer) error { return agentListing.print(out, p, agents, printNow) }, `
agent/agent-a
`},
		{"table", func(p printer, out *bytes.Buffer) error { return eventListing.print(out, p, events, printNow) }, `
TIME                  AGE  KIND    STATUS   MESSAGE
2026-12-02T11:50:00Z  10m  status  pending  created
2026-12-02T11:59:15Z  45s  status  ready    ready on http://a
`},
		{"wide", func(p printer, out *bytes.Buffer) error { return eventListing.print(out, p, events, printNow) }, `
SEQ  TIME                  AGE  KIND    STATUS   MESSAGE
41   2026-12-02T11:50:00Z  10m  status  pending  created
42   2026-12-02T11:59:15Z  45s  status  ready    ready on http://a
`},
		{"jsonpath={[*].seq}", func(p printer, out *bytes.Buffer) error { return eventListing.print(out, p, events, printNow) }, `
41 42`},
	} {
		opts := &globalOptions{output: tt.output}
		p, err := opts.printerFor(newAgentsCommand(opts), printFlags{}, outputTable, outputWide, outputName, outputJSONPath)
		if err != nil {
			t.Fatalf("-o %s: %v", tt.output, err)
		}
		var out bytes.Buffer
		if err := tt.print(p, &out); err != nil {
			t.Fatalf("-o %s: %v", tt.output, err)
		}
		if want := strings.TrimPrefix(tt.want, "\n"); out.String() != want {
			t.Errorf("-o %s printed\n%s\nwant\n%s", tt.output, out.String(), want)
		}
	}
}

// --sort-by takes a JSONPath into the -o json item in kubectl's relaxed forms; numbers sort
// as numbers, times as times, and items without the value first, the rest keeping their
// order.
func TestSortBy(t *testing.T) {
	rs := printedResources()
	rs = append(rs, domain.Resource{ID: "33333333-3333-3333-3333-333333333333", Type: "runtime", Name: "c", Args: map[string]any{},
		CreatedAt: printNow.Add(-3*24*time.Hour - 500*time.Millisecond), UpdatedAt: printNow})
	for _, tt := range []struct{ sortBy, want string }{
		{".args.slots", "runtime/c runtime/a runtime/b"},
		{"args.slots", "runtime/c runtime/a runtime/b"},
		{"{.args.slots}", "runtime/c runtime/a runtime/b"},
		{".created_at", "runtime/c runtime/a runtime/b"},
		{".updated_at", "runtime/a runtime/b runtime/c"},
		{".name", "runtime/a runtime/b runtime/c"},
		{".status_message", "runtime/a runtime/c runtime/b"},
	} {
		var out bytes.Buffer
		p := printer{format: outputName, printFlags: printFlags{sortBy: tt.sortBy}}
		if err := resourceListing.print(&out, p, append([]domain.Resource(nil), rs...), printNow); err != nil {
			t.Fatalf("--sort-by %s: %v", tt.sortBy, err)
		}
		if got := strings.Join(strings.Fields(out.String()), " "); got != tt.want {
			t.Errorf("--sort-by %s: %s, want %s", tt.sortBy, got, tt.want)
		}
	}
	err := resourceListing.print(&bytes.Buffer{}, printer{format: outputName, printFlags: printFlags{sortBy: ".nosuch"}}, rs, printNow)
	if err == nil || !strings.Contains(err.Error(), `--sort-by: ".nosuch" names no field`) || !strings.Contains(err.Error(), "--sort-by .created_at") {
		t.Errorf("--sort-by .nosuch: %v, want an error naming the flag and an example", err)
	}
}

// An -o value a command does not take is refused before anything is read, listing the
// values it does take; so are an empty or broken template and a broken --sort-by.
func TestOutputFlagErrorsNameTheValidValues(t *testing.T) {
	clearEnv(t)
	all := "use one of table, wide, json, yaml, name, jsonpath=TEMPLATE"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"resource", "list", "-o", "xml"}, `"xml" is not an output format of berth resource list: ` + all},
		{[]string{"resource", "get", "x", "-o", "names"}, `"names" is not an output format of berth resource get: ` + all},
		{[]string{"agents", "-o", "custom-columns=ID:.id"}, `is not an output format of berth agents: ` + all},
		{[]string{"resource", "events", "x", "-o", "name"}, `"name" is not an output format of berth resource events: use one of table, wide, json, yaml, jsonpath=TEMPLATE`},
		{[]string{"capacity", "-o", "wide"}, `"wide" is not an output format of berth capacity: use one of table, json, yaml, jsonpath=TEMPLATE`},
		{[]string{"resource", "list", "-o", "jsonpath"}, `"jsonpath" is not an output format of berth resource list: ` + all},
		{[]string{"resource", "list", "-o", "jsonpath="}, `-o jsonpath=: the template is empty`},
		{[]string{"resource", "list", "-o", "jsonpath={.name"}, `-o jsonpath: unclosed action: fix the template`},
		{[]string{"resource", "list", "--sort-by", "{.name"}, `--sort-by: "{.name" is not a JSONPath`},
	} {
		_, _, err := runBerth(testclock.NewClock(printNow), tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("berth %s: %v, want it to contain %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

// A watch's rows keep the first page's columns: a resource that moves to a longer status
// word than any on the first page, or grows an older AGE, still lines up with the header.
func TestWatchRowsKeepTheirColumns(t *testing.T) {
	var out bytes.Buffer
	now := printNow
	w := newWatchPrinter(&out, printer{format: outputTable}, func() time.Time { return now })
	rs := printedResources()
	if err := w.initial(rs); err != nil {
		t.Fatal(err)
	}
	b := rs[1]
	b.Status, b.StatusMessage, b.ObservedGeneration = domain.StatusProvisioning, "placing on http://a", 2
	now = now.Add(20 * 24 * time.Hour)
	if err := w.change(domain.ResourceChange{Resource: b}); err != nil {
		t.Fatal(err)
	}
	// The same resource again, only older: not a change.
	now = now.Add(time.Hour)
	if err := w.change(domain.ResourceChange{Resource: b}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("printed %d lines, want the header, two rows and one change:\n%s", len(lines), out.String())
	}
	for _, col := range []string{"STATUS", "GEN", "AGE", "ARGS", "MESSAGE"} {
		at := strings.Index(lines[0], col)
		for _, line := range lines[1:] {
			if len(line) < at || line[at-2:at] != "  " || (len(line) > at && line[at] == ' ') {
				t.Errorf("column %s does not line up at %d:\n%s", col, at, out.String())
			}
		}
	}
	if !strings.Contains(lines[3], "provisioning") || !strings.Contains(lines[3], "20d") {
		t.Errorf("the change row is %q, want provisioning, 20d old", lines[3])
	}
}

// A watch in -o name or -o jsonpath prints one line per change, the template over the
// resource's -o json object; a change of nothing but time is not printed.
func TestWatchPrintsOneLinePerChange(t *testing.T) {
	for _, tt := range []struct{ output, want string }{
		{"name", "runtime/a\nruntime/b\nruntime/b\n"},
		{"jsonpath={.name} {.status}", "a ready\nb pending\nb provisioning\n"},
	} {
		opts := &globalOptions{output: tt.output}
		p, err := opts.printerFor(newResourceListCommand(opts), printFlags{}, resourceFormats...)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		now := printNow
		w := newWatchPrinter(&out, p, func() time.Time { return now })
		rs := printedResources()
		if err := w.initial(rs); err != nil {
			t.Fatal(err)
		}
		b := rs[1]
		b.Status = domain.StatusProvisioning
		now = now.Add(time.Hour)
		for range 2 {
			if err := w.change(domain.ResourceChange{Resource: b}); err != nil {
				t.Fatal(err)
			}
		}
		if out.String() != tt.want {
			t.Errorf("-o %s --watch printed %q, want %q", tt.output, out.String(), tt.want)
		}
	}
}

// AGE reads the command's clock: a resource created now is 3d old three days on; -o json
// carries created_at and updated_at.
func TestAgeReadsTheCommandsClock(t *testing.T) {
	c := newCLI(t)
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "aged", "--owner", "acme", "-o", "json"))["id"].(string)
	c.clk.Advance(3*24*time.Hour + time.Minute)
	out := c.mustRun("resource", "list", "--no-headers")
	if !strings.HasPrefix(out, id) || !regexp.MustCompile(`\s3d\s`).MatchString(out) {
		t.Errorf("list printed %q, want the resource 3d old", out)
	}
	if got := c.mustRun("resource", "get", "aged", "-o", "jsonpath={.created_at} {.updated_at}"); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+Z \d{4}-\d\d-\d\dT\S+Z$`).MatchString(got) {
		t.Errorf("get -o jsonpath of the times printed %q", got)
	}
	if got := c.mustRun("resource", "get", id, "-o", "name"); got != "runtime/aged\n" {
		t.Errorf("get -o name printed %q", got)
	}
}
