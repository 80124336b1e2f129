package domain

import (
	"context"
	"errors"
	"fmt"
)

// ErrSchemaTooNew is returned when the database's schema is newer than this build of Berth
// knows: a newer build migrated it (a rolling update under way, or a rollback). This build
// must not act on it (its idea of the tables is out of date), so the agent's writes refuse,
// and migrate refuses to run this build's migrations against it. See SchemaTooNewError.
var ErrSchemaTooNew = errors.New("the database's schema is newer than this build of Berth knows")

// SchemaVersions are the schema version this build of Berth knows (its newest embedded
// migration) and the database's (its newest applied migration).
type SchemaVersions struct {
	Known    int
	Database int
}

// TooNew says the database's schema is newer than the build knows.
func (v SchemaVersions) TooNew() bool { return v.Database > v.Known }

// Err is a *SchemaTooNewError when the database's schema is newer than the build knows,
// else nil.
func (v SchemaVersions) Err() error {
	if !v.TooNew() {
		return nil
	}
	return &SchemaTooNewError{Versions: v}
}

// SchemaTooNewError is ErrSchemaTooNew with the versions, and the fix.
type SchemaTooNewError struct {
	Versions SchemaVersions
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("the database's schema is at version %d, newer than this build of Berth knows (%d): replace this agent with a build that knows schema version %d",
		e.Versions.Database, e.Versions.Known, e.Versions.Database)
}

// Unwrap makes errors.Is(err, ErrSchemaTooNew) true.
func (e *SchemaTooNewError) Unwrap() error { return ErrSchemaTooNew }

// SchemaStore tells an agent whether the database's schema is one its build knows. Every
// agent write that decides what happens to a resource (a claim of its lease, a record of an
// attempt's progress, a finalized delete, a leadership claim) is fenced on the same check in
// its own statement, so none applies once a newer schema has landed, even between two
// calls of CheckSchema.
type SchemaStore interface {
	// CheckSchema returns the versions, and an error wrapping ErrSchemaTooNew (a
	// *SchemaTooNewError) when the database's schema is newer than the build knows.
	CheckSchema(ctx context.Context) (SchemaVersions, error)
}
