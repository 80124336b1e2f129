package postgres

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/berth-dev/berth/domain"
)

// DatabaseIdentity digests the database's oid and name and the time its first migration was
// applied: what every role that may read Berth's tables sees alike, a failover to a replica
// keeps, and another database (or a restored copy of this one) does not share.
func (s *State) DatabaseIdentity(ctx context.Context) (domain.DatabaseIdentity, error) {
	var (
		name    string
		oid     uint32
		applied time.Time
	)
	err := s.pool.QueryRow(ctx, `
		SELECT d.datname, d.oid, m.applied_at
		  FROM pg_database d,
		       (SELECT applied_at FROM schema_migrations ORDER BY version LIMIT 1) m
		 WHERE d.datname = current_database()`).Scan(&name, &oid, &applied)
	if err != nil {
		return domain.DatabaseIdentity{}, fmt.Errorf("read the database's identity: %w", err)
	}
	conn := s.pool.Config().ConnConfig
	return domain.DatabaseIdentity{
		ID:    domain.DatabaseID("postgres", strconv.FormatUint(uint64(oid), 10), name, applied.UTC().Format(time.RFC3339Nano)),
		Where: fmt.Sprintf("PostgreSQL database %s on %s", name, net.JoinHostPort(conn.Host, strconv.Itoa(int(conn.Port)))),
	}, nil
}
