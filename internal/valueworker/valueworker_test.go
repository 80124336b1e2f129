package valueworker_test

import (
	"testing"

	"github.com/juju/clock"

	"github.com/berth-dev/berth/internal/valueworker"
)

func TestOutputAssignsTheValueAndRejectsOtherTypes(t *testing.T) {
	w, err := valueworker.New(clock.WallClock)
	if err != nil {
		t.Fatal(err)
	}
	var clk clock.Clock
	if err := valueworker.Output(w, &clk); err != nil {
		t.Fatal(err)
	}
	if clk != clock.WallClock {
		t.Fatalf("output %v, want the wall clock", clk)
	}
	var n *int
	if err := valueworker.Output(w, &n); err == nil {
		t.Fatal("output into *int succeeded")
	}
	if err := valueworker.Output(w, clk); err == nil {
		t.Fatal("output into a non-pointer succeeded")
	}
	w.Kill()
	if err := w.Wait(); err != nil {
		t.Fatalf("wait: %v", err)
	}
}

func TestNewRefusesNil(t *testing.T) {
	if _, err := valueworker.New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}
