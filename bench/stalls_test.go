package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// alternating returns n samples of each side, inserted every 50 ms half a period apart as
// the side-by-side run inserts them, Berth's taking 2 ms and River's 1 ms, but for the
// indexes given their own latency.
func alternating(n int, berthSlow, riverSlow map[int]time.Duration) (berth, river []timedLatency) {
	start := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for i := range n {
		at := start.Add(time.Duration(i) * 50 * time.Millisecond)
		b, r := 2*time.Millisecond, time.Millisecond
		if d, ok := berthSlow[i]; ok {
			b = d
		}
		if d, ok := riverSlow[i]; ok {
			r = d
		}
		berth = append(berth, timedLatency{at: at, lat: b})
		river = append(river, timedLatency{at: at.Add(25 * time.Millisecond), lat: r})
	}
	return berth, river
}

// slowFrom returns latency d for the indexes from first to last.
func slowFrom(first, last int, d time.Duration) map[int]time.Duration {
	m := make(map[int]time.Duration)
	for i := first; i <= last; i++ {
		m[i] = d
	}
	return m
}

// Of a side's slowest 1%, those counted are the ones the other side's slowest 10% were
// inserted next to, the insert before or after, and no further; the share of all samples
// so placed is what chance gives.
func TestSharedStallsCountsTheSlowestBesideTheOtherSidesSlowOnes(t *testing.T) {
	const window = 37500 * time.Microsecond
	berthSlow := map[int]time.Duration{10: 20 * time.Millisecond, 50: 30 * time.Millisecond}
	for _, tc := range []struct {
		name      string
		riverSlow map[int]time.Duration
		want      stallShare
	}{
		// River's slow ones, 10 to 29, are next to Berth's 10 to 30 (River's i is inserted
		// after Berth's i and before Berth's i+1): Berth's 10 is beside them, its 50 not.
		{"one beside", slowFrom(10, 29, 10*time.Millisecond), stallShare{slowest: 2, beside: 1, all: 21.0 / 200}},
		// River's 51 to 70 begin 75 ms after Berth's 50: past the window.
		{"none beside", slowFrom(51, 70, 10*time.Millisecond), stallShare{slowest: 2, beside: 0, all: 21.0 / 200}},
		{"the other beside", slowFrom(40, 59, 10*time.Millisecond), stallShare{slowest: 2, beside: 1, all: 21.0 / 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			berth, river := alternating(200, berthSlow, tc.riverSlow)
			if got := sharedStalls(berth, river, window); got != tc.want {
				t.Errorf("sharedStalls = %+v; want %+v", got, tc.want)
			}
		})
	}
	riverSlow := slowFrom(5, 23, 10*time.Millisecond)
	riverSlow[50] = 10 * time.Millisecond
	berth, river := alternating(200, berthSlow, riverSlow)
	if got := sharedStalls(berth, river, window); got.beside != 2 {
		t.Errorf("with River slow next to both of Berth's slowest, %d beside; want 2", got.beside)
	}
}

// River's slowest are measured against Berth's slow ones the same way, and a side with
// fewer than 100 samples still has its slowest one.
func TestSharedStallsOfFewSamples(t *testing.T) {
	berth, river := alternating(20, map[int]time.Duration{3: 9 * time.Millisecond, 4: 8 * time.Millisecond}, map[int]time.Duration{3: 7 * time.Millisecond})
	got := sharedStalls(river, berth, 37500*time.Microsecond)
	if got.slowest != 1 || got.beside != 1 {
		t.Errorf("River's slowest of 20 beside Berth's slowest: %+v; want 1 of 1", got)
	}
	if got := sharedStalls(nil, berth, time.Second); got != (stallShare{}) {
		t.Errorf("no samples: %+v; want none", got)
	}
}

func TestReportSaysWhetherTheSlowestMetTheOtherSidesSlowOnes(t *testing.T) {
	s := &sideBySideResult{
		berthStalls: stallShare{slowest: 6, beside: 2, all: 0.19},
		riverStalls: stallShare{slowest: 6, beside: 1, all: 0.2},
	}
	var out bytes.Buffer
	printSharedStalls(&out, s)
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"berth's slowest 6: 2 beside river's slow ones (of all berth's: 19%, what chance gives)",
		"river's slowest 6: 1 beside berth's slow ones (of all river's: 20%, what chance gives)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printSharedStalls(&out, &sideBySideResult{})
	if out.Len() != 0 {
		t.Errorf("without samples the report says %q; want nothing", out.String())
	}
}
