package backend

// NeedsAttentionSQL is true for a resources row the agent has work on: one not paused that
// is pending, provisioning, deleting, in error (re-evaluated at start) or hibernating; or
// asked to hibernate and not hibernated yet; or asked to run and hibernated, or ahead of its
// observed generation. It is the predicate of resources_needing_attention_idx in both
// stores' migrations (0011), which a query must state for the index to serve it; both
// dialects write it alike, so it has this one home, and each store's tests check its
// migration states it word for word.
const NeedsAttentionSQL = `(NOT paused AND (status IN ('pending', 'provisioning', 'deleting', 'error', 'hibernating')
       OR (hibernate AND status <> 'hibernated')
       OR (NOT hibernate AND (status = 'hibernated' OR generation <> observed_generation))))`

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
