package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// keyedPlansParam is the server setting Open gives every connection of a State (see Plans in
// the package doc), unless the URL sets it: sequential scans only where no index serves.
const keyedPlansParam = "enable_seqscan"

// keyedPlans makes the connections cfg opens plan by key, and compile no plan, unless its
// URL sets either. A plan that must still scan a table (a small one no index serves) carries
// the cost the first setting adds to scans, far past the server's JIT thresholds: listing the
// agents was compiled for 300 to 570 ms in a burst. No statement of Berth's is long enough
// for JIT to pay.
func keyedPlans(cfg *pgxpool.Config) {
	for param, value := range map[string]string{keyedPlansParam: "off", "jit": "off"} {
		if _, set := cfg.ConnConfig.RuntimeParams[param]; !set {
			cfg.ConnConfig.RuntimeParams[param] = value
		}
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
