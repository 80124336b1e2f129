package main

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func TestCapacityShowsNowTrendWarningsAndWaits(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	now := c.clk.Now().UTC().Truncate(time.Second)
	sample := func(at time.Time, host string, total, used int64, down bool) domain.CapacitySample {
		return domain.CapacitySample{At: at, Provisioner: "pool", Host: host, Unit: "slots", Total: total, Used: used, Down: down}
	}
	// Written as the leader's capacity worker writes them.
	session, err := c.st.RegisterAgent(ctx, domain.AgentInfo{ID: "leader", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, leads, err := c.st.ClaimLeadership(ctx, "leader", session, time.Hour); err != nil || !leads {
		t.Fatalf("claim leadership: %v (leads: %v)", err, leads)
	}
	term := domain.Term{Holder: "leader", Session: session}
	for _, s := range [][]domain.CapacitySample{
		{sample(now.Add(-2*time.Hour), "", 20, 1, false)}, // before the window
		{sample(now.Add(-40*time.Minute), "", 20, 12, false), sample(now.Add(-40*time.Minute), "http://a", 10, 8, false), sample(now.Add(-40*time.Minute), "http://b", 10, 4, false)},
		{sample(now.Add(-time.Minute), "", 20, 17, false), sample(now.Add(-time.Minute), "http://a", 10, 9, false), sample(now.Add(-time.Minute), "http://b", 10, 8, true)},
	} {
		if err := c.st.RecordCapacity(ctx, term, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.st.SetCapacityWarning(ctx, term, domain.CapacityWarning{Provisioner: "pool", Kind: "total", Active: true, Message: "90% of 10 slots used", Since: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// The pool's reservations are still as the newest sample counted them (used slots are
	// read from them live: see TestCapacityUsedSlotsAreLive).
	if _, err := c.st.Pool().Exec(ctx, `INSERT INTO slot_host_usage (provisioner, host, slots) VALUES ('pool', 'http://a', 9), ('pool', 'http://b', 8)`); err != nil {
		t.Fatal(err)
	}
	waiting := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "big", "--arg", "slots=5", "-o", "json"))["id"].(string)
	c.mustRun("resource", "create", "--type", "runtime", "--name", "plain")
	// Waiting for 90s, created long before: the wait counts from when it began.
	if _, err := c.st.Pool().Exec(ctx, `UPDATE resources SET status_message = 'waiting for capacity: no host has 5 free slots', provisioner = 'pool',
		reason = 'WaitingForCapacity', waiting_since = $2, created_at = $3 WHERE id = $1`, waiting, now.Add(-90*time.Second), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}

	var got capacityJSON
	decodeOne(t, c.mustRun("capacity", "-o", "json"), &got)
	if len(got.Provisioners) != 1 {
		t.Fatalf("provisioners = %+v, want pool", got.Provisioners)
	}
	p := got.Provisioners[0]
	if p.Name != "pool" || p.Total != 20 || p.Used != 17 || p.Free != 3 || p.UsedPercent != 85 || p.Unit != "slots" || !p.SampledAt.Equal(now.Add(-time.Minute)) {
		t.Errorf("pool now = %+v", p.capacityFigures)
	}
	if p.Trend == nil || p.Trend.Samples != 2 || p.Trend.MinUsed != 12 || p.Trend.MaxUsed != 17 ||
		!p.Trend.Oldest.At.Equal(now.Add(-40*time.Minute)) || p.Trend.Newest.Used != 17 {
		t.Errorf("pool trend over the last hour = %+v", p.Trend)
	}
	if len(p.Hosts) != 2 || p.Hosts[1].Host != "http://b" || !p.Hosts[1].Down || p.Hosts[0].Down || p.Hosts[0].UsedPercent != 90 {
		t.Errorf("hosts = %+v", p.Hosts)
	}
	if len(p.Warnings) != 1 || !p.Warnings[0].Active || p.Warnings[0].Kind != "total" {
		t.Errorf("warnings = %+v", p.Warnings)
	}
	if len(got.Waiting) != 1 || got.Waiting[0].ID != waiting || got.Waiting[0].WaitingSeconds != 90 || got.Waiting[0].Provisioner != "pool" {
		t.Errorf("waiting = %+v, want only %s, waiting 90s", got.Waiting, waiting)
	}

	// A wider window reaches the older sample.
	decodeOne(t, c.mustRun("capacity", "--since", "3h", "-o", "json"), &got)
	if tr := got.Provisioners[0].Trend; tr == nil || tr.Samples != 3 || tr.MinUsed != 1 {
		t.Errorf("trend over 3h = %+v", tr)
	}

	table := c.mustRun("capacity")
	for _, want := range []string{"(total)", "85.0%", "http://b", "down", "ACTIVE", "90% of 10 slots used", "WAITING FOR CAPACITY (1)", waiting, "1m30s", "12/20 at"} {
		if !strings.Contains(table, want) {
			t.Errorf("capacity table lacks %q:\n%s", want, table)
		}
	}
}

func TestCapacityWithNothingSampled(t *testing.T) {
	c := newCLI(t)
	out := c.mustRun("capacity", "-o", "json")
	var got map[string]any
	decodeOne(t, out, &got)
	if p, _ := json.Marshal(got["provisioners"]); string(p) != "[]" {
		t.Errorf("provisioners = %s, want []", p)
	}
	if table := c.mustRun("capacity"); !strings.Contains(table, "no capacity sampled yet") {
		t.Errorf("empty capacity table:\n%s", table)
	}
	if _, _, err := c.run("capacity", "--since", "0s"); err == nil || !strings.Contains(err.Error(), "--since: must be positive") {
		t.Errorf("capacity --since 0s: %v", err)
	}
}

// The used slots of a pool counted in slots are its reservations as they are now, not as
// the agent last sampled them: a runtime created (or deleted) since shows at once. Totals,
// down hosts and the sample time stay the sample's; other units stay as sampled.
func TestCapacityUsedSlotsAreLive(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	at := c.clk.Now().UTC().Truncate(time.Second).Add(-3 * time.Second)
	session, err := c.st.RegisterAgent(ctx, domain.AgentInfo{ID: "leader", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, leads, err := c.st.ClaimLeadership(ctx, "leader", session, time.Hour); err != nil || !leads {
		t.Fatalf("claim leadership: %v (leads: %v)", err, leads)
	}
	// Sampled before anything was reserved.
	if err := c.st.RecordCapacity(ctx, domain.Term{Holder: "leader", Session: session}, []domain.CapacitySample{
		{At: at, Provisioner: "dev", Unit: "slots", Total: 8},
		{At: at, Provisioner: "dev", Host: "http://a", Unit: "slots", Total: 4},
		{At: at, Provisioner: "dev", Host: "http://b", Unit: "slots", Total: 4, Down: true},
		{At: at, Provisioner: "kube", Unit: "millicpu", Total: 4000, Used: 1500},
	}); err != nil {
		t.Fatal(err)
	}
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "hello", "--owner", "demo", "--provisioner", "dev", "--arg", "slots=2", "-o", "json"))["id"].(string)
	if _, err := c.st.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "dev", ResourceID: id, Owner: "demo", Slots: 2, HostSlots: func(string) int { return math.MaxInt32 }},
		func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
			return "http://a", nil
		}); err != nil {
		t.Fatal(err)
	}

	var got capacityJSON
	decodeOne(t, c.mustRun("capacity", "-o", "json"), &got)
	if len(got.Provisioners) != 2 {
		t.Fatalf("provisioners = %+v, want dev and kube", got.Provisioners)
	}
	dev, kube := got.Provisioners[0], got.Provisioners[1]
	if dev.Total != 8 || dev.Used != 2 || dev.Free != 6 || dev.UsedPercent != 25 || !dev.SampledAt.Equal(at) {
		t.Errorf("dev total = %+v, want 2 of 8 slots used, as sampled at %s", dev.capacityFigures, at)
	}
	if len(dev.Hosts) != 2 || dev.Hosts[0].Used != 2 || dev.Hosts[0].Free != 2 || dev.Hosts[1].Used != 0 || !dev.Hosts[1].Down {
		t.Errorf("dev hosts = %+v, want 2 slots used on http://a, none on http://b (down)", dev.Hosts)
	}
	if kube.Used != 1500 || kube.Total != 4000 {
		t.Errorf("kube = %+v, want its millicpu as sampled", kube.capacityFigures)
	}

	// Released: the slots are free again before the next sample.
	if err := c.st.ReleaseSlots(ctx, "dev", id, nil); err != nil {
		t.Fatal(err)
	}
	decodeOne(t, c.mustRun("capacity", "-o", "json"), &got)
	if p := got.Provisioners[0]; p.Used != 0 || p.Hosts[0].Used != 0 {
		t.Errorf("after the release dev = %+v, hosts %+v: want nothing used", p.capacityFigures, p.Hosts)
	}
}

// Each provisioner's breaker shows with its state, failures, next probe and last error.
func TestCapacityShowsBreakers(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	if table := c.mustRun("capacity"); !strings.Contains(table, "BREAKERS") || !strings.Contains(table, "none: no broker has failed") {
		t.Errorf("capacity table without breakers:\n%s", table)
	}
	f := domain.BrokerFailure{Settings: domain.BreakerSettings{Failures: 2, Window: time.Minute, OpenFor: time.Hour, MaxOpenFor: time.Hour},
		Error: "503 Service Unavailable from the API server"}
	for range 2 {
		if _, err := c.st.RecordBrokerFailure(ctx, "k8s", f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.st.RecordBrokerFailure(ctx, "other", f); err != nil {
		t.Fatal(err)
	}
	var got capacityJSON
	decodeOne(t, c.mustRun("capacity", "-o", "json"), &got)
	if len(got.Breakers) != 2 {
		t.Fatalf("breakers = %+v, want k8s and other", got.Breakers)
	}
	k := got.Breakers[0]
	if k.Provisioner != "k8s" || k.State != "open" || k.Failures != 2 || k.NextProbeAt == nil || k.OpenedAt == nil || k.LastError != f.Error {
		t.Errorf("k8s breaker = %+v", k)
	}
	if o := got.Breakers[1]; o.State != "closed" || o.NextProbeAt != nil || o.Failures != 1 {
		t.Errorf("other breaker = %+v", o)
	}
	table := c.mustRun("capacity")
	for _, want := range []string{"BREAKERS", "k8s", "open", "in ", "503 Service Unavailable from the API server", "other"} {
		if !strings.Contains(table, want) {
			t.Errorf("capacity table lacks %q:\n%s", want, table)
		}
	}
}
