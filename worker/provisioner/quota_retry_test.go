package provisioner

import (
	"fmt"
	"time"

	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
)

type quotaRetrySuite struct{}

var _ = gc.Suite(&quotaRetrySuite{})

// An admission over quota is a wait: pending for a create, ready for a resize of a serving
// resource, retried within CapacityRetry, and a retry that still finds the quota full keeps
// the row's message (one history event for the wait).
func (*quotaRetrySuite) TestDecideOverQuota(c *gc.C) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	policy := retryPolicy{base: 10 * time.Second, max: 5 * time.Minute, capacityRetry: time.Minute, rand: func() float64 { return 0.5 }}
	five := int64(5)
	over := fmt.Errorf("admit: admit resource r1: %w", &domain.QuotaExceededError{
		Quota: domain.Quota{Owner: "acme", Provisioner: "pool", MaxResources: &five}, Resources: 5, Needs: 2})
	const why = `owner "acme" on provisioner "pool": 5 of 5 resources; this resource needs 2 slots`

	d := policy.decide(failure{kind: failedOverQuota, err: over, attempts: 7, status: domain.StatusProvisioning}, now)
	c.Check(d.status, gc.Equals, domain.StatusPending)
	c.Check(d.reason, gc.Equals, domain.ReasonQuotaExceeded)
	c.Check(d.message, gc.Equals, "waiting for quota: "+why)
	c.Check(d.outcome, gc.Equals, OutcomeCapacity)
	c.Check(d.retryIn, gc.Equals, time.Minute)
	c.Check(d.stillWaiting, gc.Equals, false)

	again := policy.decide(failure{kind: failedOverQuota, err: over, attempts: 8, status: domain.StatusPending,
		reason: domain.ReasonQuotaExceeded, message: "waiting for quota: as it was"}, now)
	c.Check(again.stillWaiting, gc.Equals, true)
	c.Check(again.message, gc.Equals, "waiting for quota: as it was")

	resize := policy.decide(failure{kind: failedResizeOverQuota, err: over, attempts: 0, status: domain.StatusProvisioning,
		generation: 3, observed: 2}, now)
	c.Check(resize.status, gc.Equals, domain.StatusReady)
	c.Check(resize.reason, gc.Equals, domain.ReasonQuotaExceeded)
	c.Check(resize.message, gc.Equals, "waiting for quota: "+why+"; serving generation 2 meanwhile")
	c.Check(resize.retryIn > 0 && resize.retryIn <= time.Minute, gc.Equals, true)
}
