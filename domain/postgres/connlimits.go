package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ConnectionLimit is a CONNECTION LIMIT the server puts on the State's role or database,
// which every connection of that role or to that database counts against: those of other
// agent replicas and clients too.
type ConnectionLimit struct {
	Of    string // "role" or "database"
	Name  string // the role's or the database's name
	Limit int
}

// Fix is the statement that raises the limit to n.
func (l ConnectionLimit) Fix(n int) string {
	kind := "ROLE"
	if l.Of == "database" {
		kind = "DATABASE"
	}
	return fmt.Sprintf("ALTER %s %s CONNECTION LIMIT %d", kind, pgx.Identifier{l.Name}.Sanitize(), n)
}

// AgentConnections is how many connections an agent on this State may hold at once: its
// main pool's size, one more that the pool opens in place of the one its listener takes for
// good, and the change log's (see Connections in the package doc).
func (s *State) AgentConnections() int {
	return int(s.pool.Config().MaxConns) + 2
}

// ConnectionLimitsBelow returns the connection limits of the State's role and database that
// are set and below n. A superuser has none: the server exempts it from both.
func (s *State) ConnectionLimitsBelow(ctx context.Context, n int) ([]ConnectionLimit, error) {
	var (
		role, database       string
		roleLimit, dataLimit int
		super                bool
	)
	if err := s.pool.QueryRow(ctx, `
		SELECT r.rolname, r.rolconnlimit, r.rolsuper, d.datname, d.datconnlimit
		  FROM pg_roles r, pg_database d
		 WHERE r.rolname = current_user AND d.datname = current_database()`).Scan(&role, &roleLimit, &super, &database, &dataLimit); err != nil {
		return nil, fmt.Errorf("read the connection limits of the role and the database: %w", err)
	}
	if super {
		return nil, nil
	}
	var below []ConnectionLimit
	if roleLimit >= 0 && roleLimit < n {
		below = append(below, ConnectionLimit{Of: "role", Name: role, Limit: roleLimit})
	}
	if dataLimit >= 0 && dataLimit < n {
		below = append(below, ConnectionLimit{Of: "database", Name: database, Limit: dataLimit})
	}
	return below, nil
}
