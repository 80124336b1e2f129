package main

import (
	"testing"
	"time"

	"github.com/juju/clock/testclock"
)

// TestVersionFlag: berth --version prints the stamped version alone, as image and package
// checks expect.
func TestVersionFlag(t *testing.T) {
	clearEnv(t)
	out, _, err := runBerth(testclock.NewClock(time.Now()), "--version")
	if err != nil {
		t.Fatalf("berth --version: %v", err)
	}
	if want := "berth " + version + "\n"; out != want {
		t.Errorf("berth --version = %q, want %q", out, want)
	}
}
