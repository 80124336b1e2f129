package backend

// The statements on resource_events that both dialects write alike.

// InsertRepairEventSQL records a repair event of resource $1, in status $2, saying $3.
const InsertRepairEventSQL = `
	INSERT INTO resource_events (resource_id, kind, status, message)
	VALUES ($1, 'repair', $2, $3)`

// InsertRepairEventNowSQL records a repair event of resource $1, in the status it has now,
// saying $2; it inserts nothing when the row is gone.
const InsertRepairEventNowSQL = `
	INSERT INTO resource_events (resource_id, kind, status, message)
	SELECT id, 'repair', status, $2 FROM resources WHERE id = $1`

// LatestEventSQL reads the newest event's seq (0 for none).
const LatestEventSQL = `SELECT coalesce(max(seq), 0) FROM resource_events`
