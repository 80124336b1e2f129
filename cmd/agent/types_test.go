package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
)

// runBerthWith runs the command tree in-process with the resource types of types.
func runBerthWith(types *environ.Catalog, args ...string) (stdout string, err error) {
	var out, errOut bytes.Buffer
	cmd := newRootCommandWith(&globalOptions{clock: clock.WallClock, pollInterval: time.Second, types: types})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(""))
	err = cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// The CLI's --type help and completion, its --arg parsing and its errors for an unknown type
// come from the registry's catalog: berth run's registry serves runtime, clickhouse and postgres, and a
// registry with one more environ serves that environ's types as well, with no change to the
// CLI.
func TestTypesComeFromTheRegistry(t *testing.T) {
	clearEnv(t)
	if got, want := newRegistry().Catalog().Names(), "runtime, clickhouse, postgres"; got != want {
		t.Errorf("berth run's registry serves %q, want %q", got, want)
	}
	registry := newRegistry()
	registry.Register("widgets", func(string, json.RawMessage, environ.Deps) (environ.Environ, error) {
		return &environtest.Environ{}, nil
	}, environtest.Widget)
	types := registry.Catalog()

	help, err := runBerthWith(types, "resource", "create", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"runtime      slots (whole number, 1 to 1000000; default 1), version (string)",
		"clickhouse   takes no args",
		"widget       size (whole number, 1 to 10; default 1), colour (string)",
		"resource type: runtime, clickhouse, postgres, widget",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("create --help does not say %q:\n%s", want, help)
		}
	}
	listHelp, err := runBerthWith(types, "resource", "list", "--help")
	if err != nil || !strings.Contains(listHelp, "only resources of this type: runtime, clickhouse, postgres, widget") {
		t.Errorf("list --help: %v\n%s", err, listHelp)
	}

	completed, err := runBerthWith(types, "__complete", "resource", "create", "--type", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(completed); len(got) < 4 || strings.Join(got[:4], " ") != "runtime clickhouse postgres widget" {
		t.Errorf("--type completes %q, want runtime, clickhouse, postgres and widget", completed)
	}

	db := "sqlite://" + filepath.Join(t.TempDir(), "berth.db")
	if _, err := runBerthWith(types, "--database-url", db, "migrate"); err != nil {
		t.Fatal(err)
	}
	_, err = runBerthWith(types, "--database-url", db, "resource", "create", "--type", "gizmo", "--name", "g")
	if err == nil || err.Error() != `--type: "gizmo" is not a resource type: use one of runtime, clickhouse, postgres, widget` {
		t.Errorf("create of type gizmo: %v; want the served types listed", err)
	}
	_, err = runBerthWith(types, "--database-url", db, "resource", "create", "--type", "widget", "--name", "w", "--arg", "size=11")
	if err == nil || !strings.Contains(err.Error(), "--arg size: must be at most 10, got 11") {
		t.Errorf("create of a widget of size 11: %v; want the arg named", err)
	}
	out, err := runBerthWith(types, "--database-url", db, "-o", "json", "resource", "create", "--type", "widget", "--name", "w", "--arg", "size=2", "--arg", "colour=15")
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Type string         `json:"type"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Type != "widget" || created.Args["size"] != float64(2) || created.Args["colour"] != "15" {
		t.Errorf("created widget %s (%v); want size 2 and colour the text 15", out, err)
	}
}
