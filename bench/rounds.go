package main

import (
	"fmt"
	"strings"
)

// keepFastest records run, one round's run of the setting at index i of runs (a new setting
// when i is len(runs)), and returns runs: each setting keeps its fastest round's run whole,
// and the rates of all its rounds in order.
func keepFastest(runs []throughputResult, i int, run throughputResult) []throughputResult {
	if i == len(runs) {
		run.rounds = []float64{run.perSecond()}
		return append(runs, run)
	}
	rounds := append(runs[i].rounds, run.perSecond())
	if run.perSecond() > runs[i].perSecond() {
		runs[i] = run
	}
	runs[i].rounds = rounds
	return runs
}

// keepFastestRill is keepFastest for the Rill peer's runs, whose hosts filled past their
// slots are the most of any round: an overfilled host in any round is the peer's.
func keepFastestRill(runs []rillResult, i int, run rillResult) []rillResult {
	var kept []throughputResult
	if i < len(runs) {
		kept = []throughputResult{runs[i].throughputResult}
	} else {
		runs = append(runs, rillResult{})
	}
	runs[i].throughputResult = keepFastest(kept, 0, run.throughputResult)[0]
	runs[i].overfilledHosts = max(runs[i].overfilledHosts, run.overfilledHosts)
	return runs
}

// roundsNote is "; the fastest of 3 rounds: 5496.0, 6120.3, 4980.7/s" for a setting run
// in several rounds, else "".
func (t throughputResult) roundsNote() string {
	if len(t.rounds) < 2 {
		return ""
	}
	rates := make([]string, len(t.rounds))
	for i, r := range t.rounds {
		rates[i] = fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("; the fastest of %d rounds: %s/s", len(t.rounds), strings.Join(rates, ", "))
}
