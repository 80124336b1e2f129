package backend

// The statements on slot_reservations and the slot usage its triggers keep that both dialects
// write alike.

// HostUsageSQL reads, for each host provisioner $1's reservations hold slots on, the slots they
// hold and how many of owner $2's resources are on it, ordered by host.
const HostUsageSQL = `
	SELECT h.host, h.slots, coalesce(o.resources, 0)
	  FROM slot_host_usage h
	  LEFT JOIN slot_owner_usage o ON o.provisioner = h.provisioner AND o.owner = $2 AND o.host = h.host
	 WHERE h.provisioner = $1
	 ORDER BY h.host`

// DeleteReservationSQL deletes provisioner $1's reservation of resource $2.
const DeleteReservationSQL = `DELETE FROM slot_reservations WHERE provisioner = $1 AND resource_id = $2`

// ReservedByHostSQL reads what provisioner $1's reservations hold on each host that holds any,
// ordered by host, from the sums the reservations' triggers keep (slot_host_usage,
// slot_owner_usage): one row per host, however many reservations there are. Both dialects write
// it alike.
const ReservedByHostSQL = `
	SELECT h.host, h.slots, coalesce(o.resources, 0)
	  FROM slot_host_usage h
	  LEFT JOIN (SELECT host, CAST(sum(resources) AS bigint) AS resources
	               FROM slot_owner_usage WHERE provisioner = $1 GROUP BY host) o ON o.host = h.host
	 WHERE h.provisioner = $1
	 ORDER BY h.host`
