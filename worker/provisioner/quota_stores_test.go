package provisioner_test

import (
	"context"
	"strings"

	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/worker/provisioner"
)

// quotaSuite runs the worker on each real store with owner quotas on its static pool.
type quotaSuite struct{}

var _ = gc.Suite(&quotaSuite{})

func setQuota(c *gc.C, ctx context.Context, f *fitStore, resources, slots *int64) {
	_, err := f.SetQuota(ctx, domain.QuotaChange{Owner: "acme", Provisioner: "pool",
		Resources: domain.QuotaLimit{Set: resources != nil, Max: resources},
		Slots:     domain.QuotaLimit{Set: slots != nil, Max: slots}})
	c.Assert(err, gc.IsNil)
}

func ptr(n int64) *int64 { return &n }

// quotaWaits counts the resource's history events of its wait for quota.
func quotaWaits(c *gc.C, ctx context.Context, f *fitStore, id string) int {
	events, err := f.ListEvents(ctx, id, 0)
	c.Assert(err, gc.IsNil)
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e.Message, "waiting for quota") {
			n++
		}
	}
	return n
}

// A create over its owner's quota waits pending with reason QuotaExceeded, a message naming
// the quota and the usage, and one history event however often it is retried; it proceeds
// as soon as the quota rises.
func (*quotaSuite) TestCreateOverQuotaWaitsUntilTheQuotaRises(c *gc.C) {
	eachFitStore(c, 10, func(ctx context.Context, f *fitStore) {
		setQuota(c, ctx, f, ptr(1), nil)
		first := f.create(c, ctx, "first", 2)
		c.Assert(f.reconcile(c, first.ID, 1), gc.Equals, provisioner.OutcomeReady)

		r := f.create(c, ctx, "second", 2)
		c.Assert(f.reconcile(c, r.ID, 2), gc.Equals, provisioner.OutcomeCapacity)
		waiting := f.get(c, ctx, r.ID)
		c.Check(waiting.Status, gc.Equals, domain.StatusPending)
		c.Check(waiting.Reason, gc.Equals, domain.ReasonQuotaExceeded)
		c.Check(waiting.StatusMessage, gc.Equals, `waiting for quota: owner "acme" on provisioner "pool": 1 of 1 resources; this resource needs 2 slots`)
		c.Check(waiting.WaitingSince, gc.NotNil)
		c.Check(waiting.NextAttemptAt, gc.NotNil)

		// A retry that finds the quota still full adds nothing to the history.
		c.Assert(f.exec(ctx, `UPDATE resources SET next_attempt_at = NULL WHERE id = $1`, r.ID), gc.IsNil)
		c.Assert(f.reconcile(c, r.ID, 3), gc.Equals, provisioner.OutcomeCapacity)
		again := f.get(c, ctx, r.ID)
		c.Check(again.Attempts, gc.Equals, 2)
		c.Check(again.WaitingSince, gc.DeepEquals, waiting.WaitingSince)
		c.Check(quotaWaits(c, ctx, f, r.ID), gc.Equals, 1)

		// The quota rises: the store makes the retry due and logs a change, which the
		// watcher hands over.
		setQuota(c, ctx, f, ptr(2), nil)
		c.Assert(f.reconcile(c, r.ID, 4), gc.Equals, provisioner.OutcomeReady)
		done := f.get(c, ctx, r.ID)
		c.Check(done.Status, gc.Equals, domain.StatusReady)
		c.Check(done.WaitingSince, gc.IsNil)
		usage, err := f.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme"})
		c.Assert(err, gc.IsNil)
		c.Check(usage[0].Resources, gc.Equals, int64(2))
		c.Check(usage[0].Slots, gc.Equals, int64(4))
	})
}

// A create waiting for quota is woken when the agent deletes another resource of the
// provisioner, which lowers its owner's usage.
func (*quotaSuite) TestDeleteWakesAWaitForQuota(c *gc.C) {
	eachFitStore(c, 10, func(ctx context.Context, f *fitStore) {
		setQuota(c, ctx, f, nil, ptr(3))
		first := f.create(c, ctx, "first", 2)
		c.Assert(f.reconcile(c, first.ID, 1), gc.Equals, provisioner.OutcomeReady)
		r := f.create(c, ctx, "second", 2)
		c.Assert(f.reconcile(c, r.ID, 2), gc.Equals, provisioner.OutcomeCapacity)
		c.Check(f.get(c, ctx, r.ID).StatusMessage, gc.Equals,
			`waiting for quota: owner "acme" on provisioner "pool": 2 of 3 slots; this resource needs 2 slots`)

		_, err := f.RequestDelete(ctx, first.ID)
		c.Assert(err, gc.IsNil)
		f.watcher.send(c, first.ID)
		c.Check(f.metrics.waitOutcomes(c, 4)[2:], gc.DeepEquals, []string{provisioner.OutcomeDeleted, provisioner.OutcomeReady})
		c.Check(f.get(c, ctx, r.ID).Status, gc.Equals, domain.StatusReady)
	})
}

// A resize over quota leaves the resource serving at its old size, ready with reason
// QuotaExceeded, until the quota rises; a shrink lowers the owner's usage once applied.
func (*quotaSuite) TestResizeOverQuotaKeepsServing(c *gc.C) {
	eachFitStore(c, 10, func(ctx context.Context, f *fitStore) {
		setQuota(c, ctx, f, nil, ptr(3))
		r := f.create(c, ctx, "grows", 2)
		c.Assert(f.reconcile(c, r.ID, 1), gc.Equals, provisioner.OutcomeReady)

		_, err := f.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 4})
		c.Assert(err, gc.IsNil)
		c.Assert(f.reconcile(c, r.ID, 2), gc.Equals, provisioner.OutcomeCapacity)
		waiting := f.get(c, ctx, r.ID)
		c.Check(waiting.Status, gc.Equals, domain.StatusReady)
		c.Check(waiting.Reason, gc.Equals, domain.ReasonQuotaExceeded)
		c.Check(waiting.ObservedGeneration, gc.Equals, int64(1))
		c.Check(waiting.StatusMessage, gc.Equals,
			`waiting for quota: owner "acme" on provisioner "pool": 0 of 3 slots; this resource needs 4 slots; serving generation 1 meanwhile`)
		c.Check(waiting.State["slots"], gc.Equals, float64(2))

		setQuota(c, ctx, f, nil, ptr(4))
		c.Assert(f.reconcile(c, r.ID, 3), gc.Equals, provisioner.OutcomeReady)
		c.Check(f.get(c, ctx, r.ID).ObservedGeneration, gc.Equals, int64(2))

		_, err = f.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 1})
		c.Assert(err, gc.IsNil)
		c.Assert(f.reconcile(c, r.ID, 4), gc.Equals, provisioner.OutcomeReady)
		usage, err := f.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme"})
		c.Assert(err, gc.IsNil)
		c.Check(usage[0].Slots, gc.Equals, int64(1))
	})
}
