package backend

// The statements on resource_events that both dialects write alike.

// InsertRepairEventSQL records a repair event of resource $1, in status $2, saying $3.
const InsertRepairEventSQL = `
	INSERT INTO resource_events (resource_id, kind, status, message)
	VALUES ($1, 'repair', $2, $3)`

// LatestEventSQL reads the newest event's seq (0 for none).
const LatestEventSQL = `SELECT coalesce(max(seq), 0) FROM resource_events`
