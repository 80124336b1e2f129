package backend

// The statements on owner_quotas that both dialects write alike.

// QuotaUsageSQL is the usage of owner $1 on provisioner $2 without resource $3: the count and
// units of its admitted resources there.
const QuotaUsageSQL = `
	SELECT count(*), coalesce(sum(admitted_units), 0) FROM resources
	 WHERE owner = $1 AND admitted_provisioner = $2 AND admitted_units IS NOT NULL AND id <> $3`

// ListQuotasSQL lists the quotas of owner $1 (” for all) on provisioner $2 (” for all) with
// their owners' usage, by owner and provisioner.
const ListQuotasSQL = `
	SELECT q.owner, q.provisioner, q.max_resources, q.max_slots, q.updated_at,
	       (SELECT count(*) FROM resources r
	         WHERE r.owner = q.owner AND r.admitted_provisioner = q.provisioner AND r.admitted_units IS NOT NULL),
	       (SELECT coalesce(sum(r.admitted_units), 0) FROM resources r
	         WHERE r.owner = q.owner AND r.admitted_provisioner = q.provisioner AND r.admitted_units IS NOT NULL)
	  FROM owner_quotas q
	 WHERE ($1 = '' OR q.owner = $1) AND ($2 = '' OR q.provisioner = $2)
	 ORDER BY q.owner, q.provisioner`

// WakeQuotaWaitersSQL makes the retry of owner $1's resources that wait for quota on
// provisioner $2 due now, and returns their ids (for the change log).
const WakeQuotaWaitersSQL = `
	UPDATE resources SET next_attempt_at = NULL
	 WHERE owner = $1 AND provisioner = $2 AND reason = 'QuotaExceeded'
	RETURNING id`
