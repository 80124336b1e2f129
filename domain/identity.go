package domain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// DatabaseIdentity tells one Berth database from another, so that a CLI can check that the
// agent it talks to works on the database the CLI reads. Nothing in it is secret: it is
// served on the agent's unauthenticated HTTP endpoint.
type DatabaseIdentity struct {
	// ID is the same for every connection to one database, whoever connects (an agent or a
	// client role), and differs between databases: a digest of what the database alone
	// holds (the time Berth first migrated it, and for PostgreSQL the database's name and
	// oid), stable while the database lives.
	ID string
	// Where describes the database for people, e.g. "SQLite file /var/lib/berth/berth.db"
	// or "PostgreSQL database berth on db.internal:5432"; two names of one database (a
	// host's alias) may describe it differently, so only ID decides.
	Where string
}

// The keys of the identity in the report of the agent's database worker (on its
// /debug/engine), which berth status compares with its own database's.
const (
	IdentityReportID    = "database-id"
	IdentityReportWhere = "database"
)

// IdentityStore gives the database's identity.
type IdentityStore interface {
	// DatabaseIdentity reads the database's identity; it needs the schema (berth migrate).
	DatabaseIdentity(ctx context.Context) (DatabaseIdentity, error)
}

// DatabaseID digests parts into an ID: 16 hex digits, enough to tell databases apart and
// short enough to read in a message.
func DatabaseID(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:8])
}
