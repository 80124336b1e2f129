package main

import (
	"strings"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
)

// TestBerthExplainsItself: berth alone, and berth --help, say what Berth is, list the
// commands, say where the database is and point to the quick start.
func TestBerthExplainsItself(t *testing.T) {
	clearEnv(t)
	for _, args := range [][]string{nil, {"--help"}} {
		out, _, err := runBerth(testclock.NewClock(time.Now()), args...)
		if err != nil {
			t.Fatalf("berth %v: %v", args, err)
		}
		for _, want := range []string{
			"Berth provisions resources",
			"Available Commands:", "dev-hosts", "resource", "run ",
			"BERTH_DATABASE_URL", "embedded database", "~/.local/state/berth/berth.db", "first log line",
			"Quick start", "make run", "bin/berth resource create",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("berth %v lacks %q:\n%s", args, want, out)
			}
		}
	}
}
