package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// sql runs one statement on the test database directly, as another program would.
func (c *cli) sql(query string, args ...any) {
	c.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, query, args...); err != nil {
		c.t.Fatalf("exec %q: %v", query, err)
	}
}

// TestUnreadableRowsCanBeListedFixedAndDeleted: a row holding JSON Berth cannot decode
// (written with plain SQL) is listed and shown as unreadable without hiding the others, its
// args can be replaced though not merged into, and it can be deleted.
func TestUnreadableRowsCanBeListedFixedAndDeleted(t *testing.T) {
	c := newCLI(t)
	id := func(out string) string {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1]
	}
	good := id(c.mustRun("resource", "create", "--type", "runtime", "--name", "good", "--arg", "slots=1"))
	badConfig := id(c.mustRun("resource", "create", "--type", "runtime", "--name", "bad-config", "--arg", "slots=1"))
	badArgs := id(c.mustRun("resource", "create", "--type", "runtime", "--name", "bad-args", "--arg", "slots=1"))
	c.sql(`UPDATE resources SET config = '{"host": 1e400}' WHERE id = $1`, badConfig)
	c.sql(`UPDATE resources SET args = '{"slots": 1e400}' WHERE id = $1`, badArgs)

	list := c.mustRun("resource", "list")
	for _, want := range []string{good, "bad-config", "pending (unreadable)", "config is not JSON Berth can read: number 1e+400 out of range",
		"args is not JSON Berth can read: number 1e+400 out of range"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	get := c.mustRun("resource", "get", "bad-config")
	if !strings.Contains(get, "unreadable:") || !strings.Contains(get, "number 1e+400 out of range") {
		t.Errorf("get of an unreadable row does not say so:\n%s", get)
	}
	obj := map[string]any{}
	decodeOne(t, c.mustRun("resource", "get", badConfig, "-o", "json"), &obj)
	if obj["unreadable"] != "config is not JSON Berth can read: number 1e+400 out of range" {
		t.Errorf("-o json unreadable = %v", obj["unreadable"])
	}

	_, _, err := c.run("resource", "update", "bad-args", "--arg", "slots=2")
	if err == nil || !strings.Contains(err.Error(), "--replace") {
		t.Errorf("merge into unreadable args: %v, want a hint at --replace", err)
	}
	fixed := c.mustRun("resource", "update", "bad-args", "--replace", "--arg", "slots=2")
	if !strings.Contains(fixed, "slots=2") || strings.Contains(fixed, "unreadable") {
		t.Errorf("after --replace:\n%s", fixed)
	}
	if _, _, err := c.run("resource", "update", "bad-args", "--replace", "--unset", "slots"); err == nil {
		t.Error("--replace with --unset: nil error")
	}

	deleted := c.mustRun("resource", "delete", "bad-config")
	if !strings.Contains(deleted, "delete requested") {
		t.Errorf("delete of an unreadable row:\n%s", deleted)
	}
}
