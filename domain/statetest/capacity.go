package statetest

import (
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func testCapacityHistoryAndWarnings(t *testing.T, b *Backend) {
	ctx := testContext(t)
	term := leaderTerm(t, b, "leader")
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sample := func(at time.Time, prov, host string, total, used int64, down bool) domain.CapacitySample {
		return domain.CapacitySample{At: at, Provisioner: prov, Host: host, Unit: "slots", Total: total, Used: used, Down: down}
	}
	for i, used := range []int64{2, 6, 4} {
		at := t0.Add(time.Duration(i) * time.Minute)
		err := b.RecordCapacity(ctx, term, []domain.CapacitySample{
			sample(at, "pool", "", 10, used, false),
			sample(at, "pool", "http://a", 6, used, false),
			sample(at, "pool", "http://b", 4, 0, i == 2),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.RecordCapacity(ctx, term, []domain.CapacitySample{sample(t0, "other", "", 3, 1, false)}); err != nil {
		t.Fatal(err)
	}
	// Recording the same sample twice keeps the first.
	if err := b.RecordCapacity(ctx, term, []domain.CapacitySample{sample(t0, "other", "", 3, 3, false)}); err != nil {
		t.Fatal(err)
	}
	if err := b.RecordCapacity(ctx, term, []domain.CapacitySample{{Provisioner: "pool", Unit: "slots"}}); err == nil {
		t.Error("a sample without a time was recorded")
	}

	latest, err := b.LatestCapacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newest := t0.Add(2 * time.Minute)
	wantLatest := []domain.CapacitySample{
		sample(t0, "other", "", 3, 1, false),
		sample(newest, "pool", "", 10, 4, false),
		sample(newest, "pool", "http://a", 6, 4, false),
		sample(newest, "pool", "http://b", 4, 0, true),
	}
	if !equalSamples(latest, wantLatest) {
		t.Errorf("latest =\n%+v\nwant\n%+v", latest, wantLatest)
	}

	trends, err := b.CapacityTrends(ctx, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(trends) != 3 {
		t.Fatalf("trends = %+v, want the pool's total and two hosts (other's sample is older)", trends)
	}
	total := trends[0]
	if total.Provisioner != "pool" || total.Host != "" || total.Samples != 2 || total.MinUsed != 4 || total.MaxUsed != 6 ||
		!total.Oldest.At.Equal(t0.Add(time.Minute)) || total.Oldest.Used != 6 || !total.Newest.At.Equal(newest) || total.Newest.Used != 4 ||
		total.Unit != "slots" || total.Newest.Unit != "slots" || total.Oldest.Provisioner != "pool" {
		t.Errorf("pool total trend = %+v", total)
	}
	if a := trends[1]; a.Host != "http://a" || a.Oldest.Total != 6 || a.Newest.Total != 6 {
		t.Errorf("host a trend = %+v", a)
	}
	if hb := trends[2]; hb.Host != "http://b" || hb.Oldest.Down || !hb.Newest.Down {
		t.Errorf("host b trend = %+v, want it down only in the newest sample", hb)
	}

	// Pruning goes by the database clock: older than half a minute past t0 is t0's samples.
	pruned, err := b.PruneCapacitySamples(ctx, term, time.Since(t0)-30*time.Second)
	if err != nil || pruned != 4 {
		t.Errorf("prune samples before t0+1m = %d, %v; want 4", pruned, err)
	}

	warn := func(active bool, msg string, at time.Time) bool {
		t.Helper()
		changed, err := b.SetCapacityWarning(ctx, term, domain.CapacityWarning{Provisioner: "pool", Kind: "total", Active: active, Message: msg, Since: at})
		if err != nil {
			t.Fatal(err)
		}
		return changed
	}
	if warn(false, "", t0) {
		t.Error("a new inactive warning counts as a change")
	}
	if !warn(true, "85% used", t0.Add(time.Minute)) {
		t.Error("raising the warning is not a change")
	}
	if warn(true, "90% used", t0.Add(2*time.Minute)) {
		t.Error("staying raised is a change")
	}
	ws, err := b.ListCapacityWarnings(ctx)
	if err != nil || len(ws) != 1 || !ws[0].Active || ws[0].Message != "90% used" || !ws[0].Since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("warnings = %+v, %v; want active since the first crossing with the newest message", ws, err)
	}
	if !warn(false, "50% used", t0.Add(3*time.Minute)) {
		t.Error("clearing the warning is not a change")
	}
	if ws, _ := b.ListCapacityWarnings(ctx); ws[0].Active || !ws[0].Since.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("after clearing: %+v", ws)
	}
	if _, err := b.SetCapacityWarning(ctx, term, domain.CapacityWarning{Provisioner: "pool", Since: t0}); err == nil {
		t.Error("a warning without a kind was recorded")
	}
}

func equalSamples(a, b []domain.CapacitySample) bool {
	return slices.EqualFunc(a, b, func(x, y domain.CapacitySample) bool {
		return x.At.Equal(y.At) && x.Provisioner == y.Provisioner && x.Host == y.Host && x.Unit == y.Unit &&
			x.Total == y.Total && x.Used == y.Used && x.Down == y.Down
	})
}
