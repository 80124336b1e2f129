package backend

// The statements on leadership that both dialects write alike.

// LeadershipHolderSQL reads who holds the leadership (its one row).
const LeadershipHolderSQL = `SELECT holder FROM leadership WHERE id = 1`

// ResignLeadershipSQL gives up the leadership if agent $1 holds it in session $2.
const ResignLeadershipSQL = `DELETE FROM leadership WHERE holder = $1 AND session = $2`
