package backend

// NeedsAttentionSQL is true for a resources row the agent has work on: pending,
// provisioning, deleting, error (re-evaluated at start), or ahead of its observed
// generation. It is the predicate of resources_needing_attention_idx in both stores'
// migrations, which a query must state for the index to serve it; both dialects write it
// alike, so it has this one home.
const NeedsAttentionSQL = `(status IN ('pending', 'provisioning', 'deleting', 'error') OR generation <> observed_generation)`

// ReservedByHostSQL reads what provisioner $1's reservations hold on each host that holds
// any, ordered by host, from the sums the reservations' triggers keep (slot_host_usage,
// slot_owner_usage): one row per host, however many reservations there are. Both dialects
// write it alike.
const ReservedByHostSQL = `
	SELECT h.host, h.slots, coalesce(o.resources, 0)
	  FROM slot_host_usage h
	  LEFT JOIN (SELECT host, CAST(sum(resources) AS bigint) AS resources
	               FROM slot_owner_usage WHERE provisioner = $1 GROUP BY host) o ON o.host = h.host
	 WHERE h.provisioner = $1
	 ORDER BY h.host`
