package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// keyedPlansParam is the server setting Open gives every connection of a State (see Plans in
// the package doc), unless the URL sets it: sequential scans only where no index serves.
const keyedPlansParam = "enable_seqscan"

// sessionSetting is a server setting Open gives every connection of a State, with its value.
type sessionSetting struct{ param, value string }

// keyedPlansSettings make a connection plan by key, and compile no plan. A plan that must
// still scan a table (a small one no index serves) carries the cost the first setting adds
// to scans, far past the server's JIT thresholds: listing the agents was compiled for 300 to
// 570 ms in a burst. No statement of Berth's is long enough for JIT to pay.
var keyedPlansSettings = []sessionSetting{{keyedPlansParam, "off"}, {"jit", "off"}}

// sessionSettings makes the connections cfg opens take settings, each unless the URL sets it
// (as a parameter of its own or in options). The settings are made once a connection is
// open, in one statement, not in its startup packet, which a connection pooler may refuse.
func sessionSettings(cfg *pgxpool.Config, settings []sessionSetting) {
	var calls []string
	for _, s := range settings {
		_, set := cfg.ConnConfig.RuntimeParams[s.param]
		if !set && !strings.Contains(cfg.ConnConfig.RuntimeParams["options"], s.param) {
			calls = append(calls, "set_config('"+s.param+"', '"+s.value+"', false)")
		}
	}
	if len(calls) == 0 {
		return
	}
	query := "SELECT " + strings.Join(calls, ", ")
	afterConnect(cfg, func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, query, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("set the connection's settings: %w", err)
		}
		return nil
	})
}

// afterConnect makes the connections cfg opens run f once open, after what cfg's
// AfterConnect already runs.
func afterConnect(cfg *pgxpool.Config, f func(context.Context, *pgx.Conn) error) {
	before := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if before != nil {
			if err := before(ctx, conn); err != nil {
				return err
			}
		}
		return f(ctx, conn)
	}
}

// wholeTablePlansSQL allows sequential scans until the end of the transaction it runs in.
const wholeTablePlansSQL = `SELECT set_config('` + keyedPlansParam + `', 'on', true)`

// queryWhole runs query, a statement that reads a whole table, or may, on purpose, with
// sequential scans allowed, and calls each with its rows: one round trip, in which the
// setting lasts for the statement's own transaction.
func (s *State) queryWhole(ctx context.Context, query string, args []any, each func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	b.Queue(wholeTablePlansSQL)
	b.Queue(query, args...).Query(each)
	return s.pool.SendBatch(ctx, b).Close()
}
