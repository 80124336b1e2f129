package sqlite

import (
	"context"
	"fmt"

	"github.com/berth-dev/berth/domain"
)

// DatabaseIdentity digests the time the file's first migration was applied: the file
// keeps it whatever path it is opened by, and another file (one deleted and made again)
// has its own.
func (s *State) DatabaseIdentity(ctx context.Context) (domain.DatabaseIdentity, error) {
	var applied string
	err := s.read.QueryRowContext(ctx, `SELECT applied_at FROM schema_migrations ORDER BY version LIMIT 1`).Scan(&applied)
	if err != nil {
		return domain.DatabaseIdentity{}, fmt.Errorf("read the database's identity: %w", err)
	}
	return domain.DatabaseIdentity{ID: domain.DatabaseID("sqlite", applied), Where: "SQLite file " + s.path}, nil
}
