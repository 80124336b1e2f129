package environs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/worker/environs"
)

// stubState stands in for the store; Get only passes it on.
type stubState struct{ domain.State }

var inputNames = environs.InputNames{Clock: "clock", Database: "database", Environs: "environs"}

func TestInputsListsTheThreeNames(t *testing.T) {
	got := inputNames.Inputs()
	if len(got) != 3 || got[0] != "clock" || got[1] != "database" || got[2] != "environs" {
		t.Fatalf("Inputs() = %v", got)
	}
}

func TestGetReadsEveryInput(t *testing.T) {
	clk := testclock.NewClock(time.Time{})
	state := stubState{}
	set := &environ.Set{Default: "pool"}
	in, err := inputNames.Get(dt.StubGetter(map[string]any{"clock": clk, "database": state, "environs": set}))
	if err != nil {
		t.Fatal(err)
	}
	if in.Clock != clk || in.State != domain.State(state) || in.Environs != set {
		t.Fatalf("Get() = %+v", in)
	}
}

func TestGetReturnsTheGettersErrorForAMissingInput(t *testing.T) {
	clk := testclock.NewClock(time.Time{})
	for _, missing := range []string{"clock", "database", "environs"} {
		resources := map[string]any{"clock": clk, "database": stubState{}, "environs": &environ.Set{}}
		resources[missing] = dependency.ErrMissing
		if _, err := inputNames.Get(dt.StubGetter(resources)); !errors.Is(err, dependency.ErrMissing) {
			t.Errorf("%s missing: err = %v, want dependency.ErrMissing", missing, err)
		}
	}
}
