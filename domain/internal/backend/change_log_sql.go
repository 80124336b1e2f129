package backend

// The statements on change_log that both dialects write alike.

// LogChangeSQL logs a change of resource $1.
const LogChangeSQL = `INSERT INTO change_log (resource_id) VALUES ($1)`

// LatestChangeSQL reads the newest change's seq (0 for none).
const LatestChangeSQL = `SELECT coalesce(max(seq), 0) FROM change_log`
