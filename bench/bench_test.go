package main

import (
	"strings"
	"testing"
	"time"
)

func TestVMHWM(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int64
		ok     bool
	}{
		{"Name:\tberth\nVmPeak:\t  900 kB\nVmHWM:\t   45678 kB\nVmRSS:\t 40000 kB\n", 45678 << 10, true},
		{"Name:\tberth\nVmRSS:\t 40000 kB\n", 0, false},
		{"VmHWM:\t lots kB\n", 0, false},
	} {
		got, err := vmHWM([]byte(tc.status))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("vmHWM(%q) = %d, %v; want %d, ok=%v", tc.status, got, err, tc.want, tc.ok)
		}
	}
}

func TestSummarize(t *testing.T) {
	var sample []time.Duration
	for i := 100; i >= 1; i-- {
		sample = append(sample, time.Duration(i)*time.Millisecond)
	}
	got, err := summarize("s", sample)
	if err != nil {
		t.Fatal(err)
	}
	if got.n != 100 || got.p50 != 50*time.Millisecond || got.p99 != 99*time.Millisecond || got.max != 100*time.Millisecond {
		t.Errorf("summarize = %+v; want n 100, p50 50ms, p99 99ms, max 100ms", got)
	}
	if _, err := summarize("s", nil); err == nil {
		t.Error("summarize of an empty sample: want an error")
	}
}

func TestPositiveInts(t *testing.T) {
	got, err := positiveInts("-x", "16, 64")
	if err != nil || len(got) != 2 || got[0] != 16 || got[1] != 64 {
		t.Errorf(`positiveInts("16, 64") = %v, %v; want [16 64]`, got, err)
	}
	for _, bad := range []string{"", "0", "16,", "a"} {
		if _, err := positiveInts("-x", bad); err == nil {
			t.Errorf("positiveInts(%q): want an error", bad)
		}
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ server, want string }{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "postgres://u:p@h:5432/berth_bench_x?sslmode=disable"},
		{"postgres://h/postgres?dbname=postgres", "postgres://h/berth_bench_x"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=berth_bench_x"},
	} {
		got, err := withDatabase(tc.server, "berth_bench_x")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.server, got, err, tc.want)
		}
	}
}

func TestProvisionerSetFitsEverySlot(t *testing.T) {
	for _, tc := range []struct{ slots, hosts int }{{1, minHosts}, {10001, minHosts}, {12001, 13}} {
		set, err := provisionerSet(tc.slots)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(set, `"slots":1000`); got != tc.hosts {
			t.Errorf("provisionerSet(%d) has %d hosts; want %d", tc.slots, got, tc.hosts)
		}
	}
}
