package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// createID creates a runtime with extra flags and returns its id and what create printed on
// stderr.
func (c *cli) createID(name string, extra ...string) (string, string) {
	c.t.Helper()
	out, errOut, err := c.run(append([]string{"resource", "create", "--type", "runtime", "--name", name, "--owner", "acme", "-o", "json"}, extra...)...)
	if err != nil {
		c.t.Fatalf("create %s: %v (stderr %q)", name, err, errOut)
	}
	return decodeResource(c.t, out)["id"].(string), errOut
}

// liveAgent registers a live agent serving provisioners.
func (c *cli) liveAgent(id string, provisioners ...string) {
	c.t.Helper()
	ctx := context.Background()
	session, err := c.st.RegisterAgent(ctx, domain.AgentInfo{ID: id, Version: "v1"})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.st.SetAgentProvisioners(ctx, id, session, provisioners); err != nil {
		c.t.Fatal(err)
	}
}

func TestDeleteTakesSeveralResourcesAndSelectors(t *testing.T) {
	c := newCLI(t)
	a, _ := c.createID("a", "--label", "tier=dev")
	b, _ := c.createID("b", "--label", "tier=dev")
	keep, _ := c.createID("keep", "--label", "tier=prod")

	out, errOut, err := c.run("resource", "delete", "a", "nope", "keep")
	if err == nil || !strings.Contains(err.Error(), "1 of 3 deletes failed") {
		t.Fatalf("delete a nope keep: %v, want one of three failed", err)
	}
	if !strings.Contains(errOut, `resource "nope": no resource`) {
		t.Errorf("stderr does not name the failed one:\n%s", errOut)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[0], a) || !strings.Contains(lines[1], keep) ||
		!strings.Contains(out, "delete requested") {
		t.Errorf("delete printed:\n%s\nwant one line each for %s and %s", out, a, keep)
	}

	var deleted []map[string]any
	decodeOne(t, c.mustRun("resource", "delete", "-l", "tier=dev", "--owner", "acme", "-o", "json"), &deleted)
	if len(deleted) != 2 || deleted[0]["id"] != a || deleted[1]["id"] != b || deleted[1]["status"] != "deleting" {
		t.Errorf("delete -l tier=dev -o json = %v, want %s and %s, deleting", deleted, a, b)
	}
	if out, errOut, err := c.run("resource", "delete", "-l", "tier=none"); err != nil || out != "" || !strings.Contains(errOut, "No resources match -l tier=none") {
		t.Errorf("delete -l matching nothing: %v, stdout %q, stderr %q", err, out, errOut)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"resource", "delete"}, "needs resource IDs or names, or -l SELECTOR"},
		{[]string{"resource", "delete", "a", "-l", "tier=dev"}, "either IDs and names or -l, not both"},
		{[]string{"resource", "delete", "-l", "tier=dev", "--force"}, "--force takes IDs or names, not -l"},
		{[]string{"resource", "delete", "a", "--reason", "why"}, "--reason is recorded with --force only"},
		{[]string{"resource", "delete", "a", "--force", "--wait"}, "--wait has nothing to wait for with --force"},
		{[]string{"resource", "delete", "-l", "tier in (dev"}, "-l/--selector"},
	} {
		if out, _, err := c.run(tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) || out != "" {
			t.Errorf("%v: %v (stdout %q), want an error containing %q", tt.args, err, out, tt.want)
		}
	}
}

func TestDeleteForceForgetsAResourceWhoseProvisionerIsGone(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	id, warning := c.createID("stranded", "--provisioner", "nosuch")
	if !strings.Contains(warning, "no agent is live") {
		t.Errorf("create with no live agent warned %q, want it to say no agent is live", warning)
	}
	c.mustRun("resource", "delete", id)

	busy, _ := c.createID("busy")
	if _, err := c.st.ClaimResource(ctx, busy, "agent-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.run("resource", "delete", busy, "--force"); err == nil || !strings.Contains(err.Error(), "try again once the lease has ended") {
		t.Errorf("delete --force under a live lease: %v, want it refused until the lease ends", err)
	}
	if _, err := c.st.GetResource(ctx, busy); err != nil {
		t.Errorf("a refused force removed the row: %v", err)
	}

	out := c.mustRun("resource", "delete", "stranded", "--owner", "acme", "--force", "--reason", "nosuch never existed")
	if !strings.Contains(out, id) || !strings.Contains(out, "forgotten without deprovisioning") || !strings.Contains(out, `provisioner "nosuch"`) {
		t.Errorf("delete --force printed %q", out)
	}
	if _, err := c.st.GetResource(ctx, id); err == nil {
		t.Fatal("the forced delete kept the row")
	}
	events, err := c.st.ListEvents(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events {
		found = found || (strings.Contains(e.Message, `"nosuch never existed"`) && strings.Contains(e.Message, "database role"))
	}
	if !found {
		t.Errorf("history %v lacks the forget with its reason and role", events)
	}
}

func TestUpdateProvisionerMovesAFailedResource(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	c.liveAgent("agent-1", "static", "kube")
	id, warning := c.createID("misnamed", "--provisioner", "nosuch")
	for _, want := range []string{`no live agent serves provisioner "nosuch"`, "they serve: kube, static", "berth resource update " + id + " --provisioner NAME"} {
		if !strings.Contains(warning, want) {
			t.Errorf("create warned %q, want %q in it", warning, want)
		}
	}
	if _, err := c.st.Pool().Exec(ctx, `UPDATE resources SET status = 'error', reason = 'BrokerError', last_error = 'unknown provisioner' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}

	out, errOut, err := c.run("resource", "update", "misnamed", "--owner", "acme", "--provisioner", "static", "-o", "json")
	if err != nil {
		t.Fatalf("update --provisioner: %v", err)
	}
	if errOut != "" {
		t.Errorf("a provisioner a live agent serves warned %q", errOut)
	}
	if got := decodeResource(t, out); got["provisioner"] != "static" {
		t.Errorf("after update --provisioner static: %v", got)
	}
	r, err := c.st.GetResource(ctx, id)
	if err != nil || r.LastError != "" || r.Attempts != 0 {
		t.Errorf("the move kept the failure: %q, attempts %d (%v)", r.LastError, r.Attempts, err)
	}

	served, _ := c.createID("served", "--provisioner", "static")
	one := int64(1)
	c.record(served, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ObservedGeneration: &one, Provisioner: "static",
		State: map[string]any{"container": "c-1"}, ReleaseLease: true})
	if _, _, err := c.run("resource", "update", served, "--provisioner", "kube"); err == nil || !strings.Contains(err.Error(), "delete the resource and create it again") {
		t.Errorf("moving a ready resource: %v, want it refused naming the way out", err)
	}
	c.mustRun("resource", "delete", id)
	if _, _, err := c.run("resource", "update", id, "--provisioner", "kube"); err == nil || !strings.Contains(err.Error(), "delete --force") {
		t.Errorf("moving a resource being deleted: %v, want it refused naming delete --force", err)
	}
}

func TestAgentsShowTheirProvisioners(t *testing.T) {
	c := newCLI(t)
	c.liveAgent("agent-1", "static", "kube")
	if out := c.mustRun("agents"); !strings.Contains(out, "PROVISIONERS") || !strings.Contains(out, "kube,static") {
		t.Errorf("berth agents does not show the provisioners:\n%s", out)
	}
	var listed []map[string]any
	decodeOne(t, c.mustRun("agents", "-o", "json"), &listed)
	if got := listed[0]["provisioners"]; len(listed) != 1 || got == nil || len(got.([]any)) != 2 || got.([]any)[0] != "kube" {
		t.Errorf("agents -o json = %v, want provisioners [kube static]", listed)
	}
}
