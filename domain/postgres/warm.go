package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// warmOnConnect makes the pool cfg configures open its connections ahead, all of them unless
// the URL sets pool_min_conns, and ready each one for the provisions (warmProvisions) once
// it is open, before the pool hands it out. Opened ahead, in the background, a connection's
// opening and readying wait in no one's acquisition: a burst that finds an idle agent takes
// ready connections for its groups. schema is the version the build knows.
func warmOnConnect(cfg *pgxpool.Config, schema int) {
	if cfg.MinConns == 0 {
		cfg.MinConns = cfg.MaxConns
	}
	afterConnect(cfg, func(ctx context.Context, conn *pgx.Conn) error {
		return warmProvisions(ctx, conn, schema)
	})
}

// warmProvisions runs the statements of a group of one-transaction provisions on conn, a
// connection just opened, for no rows, in a transaction it rolls back: the server's new
// backend loads the tables' and indexes' descriptions, makes the statements' generic plans
// and compiles the statement triggers they fire, which the first group on the connection
// would otherwise wait for (17 to 28 ms, against 2 to 5 after). The rows' own triggers only
// a write compiles: the first group still spends a few ms more on them. It does nothing on
// a database whose schema is not the version schema this build knows (an agent that starts
// before migrating warms its connections again once it has, Migrate), and gives up quietly
// when a statement fails: the connection is left as it was, ready for use. It fails only
// when the connection broke.
func warmProvisions(ctx context.Context, conn *pgx.Conn, schema int) error {
	var current int
	if err := conn.QueryRow(ctx, backend.SchemaVersionSQL).Scan(&current); err != nil || current != schema {
		if conn.IsClosed() {
			return err
		}
		return nil
	}
	var (
		noIDs     = []pgtype.UUID{}
		noStrings = []string{}
		noInts    = []int64{}
	)
	ready := []any{noIDs, noStrings, "", noStrings, noStrings, noInts, noIDs, noStrings, noStrings}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(genericPlansSQL)
	b.Queue(instantLockSQL, noIDs, noInts, noStrings, "", noStrings, schema)
	b.Queue(hostUsageSQL, "")
	b.Queue(ownersUsageSQL, "", noStrings)
	for _, query := range []string{instantReadyTimesSQL, instantReadyRowsSQL} {
		b.Queue(query, ready...)
	}
	for _, query := range []string{instantWarmReadyTimesSQL, instantWarmReadyRowsSQL} {
		b.Queue(query, append(ready, noInts, noStrings, noStrings, schema)...)
	}
	b.Queue(instantReservationsSQL, "", noIDs, noStrings, noStrings, noInts)
	b.Queue(hostRoomSQL, "", noStrings, noInts, noInts)
	b.Queue(`ROLLBACK`)
	err := conn.SendBatch(ctx, b).Close()
	rollback(conn)
	if conn.IsClosed() {
		return err
	}
	return nil
}

// rewarm warms every idle connection of the pool again (warmProvisions): a migration
// changed the tables and functions the statements run on, and a connection that opened
// before it was not warmed at all.
func (s *State) rewarm(ctx context.Context) error {
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		err := warmProvisions(ctx, c.Conn(), s.schema)
		c.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
