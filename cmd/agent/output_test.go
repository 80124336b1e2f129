package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	"sigs.k8s.io/yaml"
)

// -o yaml prints what -o json prints, field for field, for a resource, a list and a command
// outside the resource tree.
func TestYAMLIsTheJSONView(t *testing.T) {
	c := newCLI(t)
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "y", "--owner", "acme", "--arg", "slots=2", "-o", "json"))["id"].(string)
	for _, args := range [][]string{
		{"resource", "get", id},
		{"resource", "list"},
		{"resource", "events", id},
	} {
		asJSON := c.mustRun(append(args, "-o", "json")...)
		asYAML := c.mustRun(append(args, "-o", "yaml")...)
		if strings.HasPrefix(strings.TrimSpace(asYAML), "{") || strings.HasPrefix(strings.TrimSpace(asYAML), "[") {
			t.Fatalf("berth %s -o yaml printed JSON:\n%s", strings.Join(args, " "), asYAML)
		}
		var fromJSON, fromYAML any
		if err := json.Unmarshal([]byte(asJSON), &fromJSON); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(asYAML), &fromYAML); err != nil {
			t.Fatalf("berth %s -o yaml is not YAML: %v\n%s", strings.Join(args, " "), err, asYAML)
		}
		if !reflect.DeepEqual(fromJSON, fromYAML) {
			t.Errorf("berth %s: -o yaml\n%s\nis not -o json\n%s", strings.Join(args, " "), asYAML, asJSON)
		}
	}
	out := c.mustRun("resource", "get", id, "-o", "yaml")
	for _, line := range []string{"id: " + id, "name: \"y\"", "owner: acme", "  slots: 2", "status: pending", "generation: 1"} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("resource get -o yaml lacks %q:\n%s", line, out)
		}
	}
	if out, _, err := runBerth(testclock.NewClock(time.Now()), "version", "-o", "yaml"); err != nil || !strings.Contains(out, "version: ") {
		t.Errorf("version -o yaml: %q, %v", out, err)
	}
}
