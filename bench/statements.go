package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// statementProfile is where a PostgreSQL run's database time went, statement by statement,
// from pg_stat_statements: every statement run in the run's database (the agent's or River's,
// the bench's insert and polls, the triggers'), with its cost per unit of the run (a resource,
// or a River job).
type statementProfile struct {
	unavailable string          // why there is no profile; empty when there is one
	unit        string          // what the costs are per: "resource" or "job"
	units       int             // how many of them the run had
	statements  []statementCost // by total time, most first
}

// statementCost is one normalized statement of a run.
type statementCost struct {
	query     string  // whitespace collapsed, cut to a line
	nested    bool    // run by a trigger or a function: its time is in its caller's too
	calls     float64 // per unit of the run
	meanUS    float64 // execution time per call
	perUnitUS float64 // execution time per unit of the run
	rows      float64 // rows per call
}

// profileLines bounds the statements shown: the rest are a few percent of the time together.
const profileLines = 16

// readStatementProfile reads pg_stat_statements for the database dbName once its run of
// units (resources or jobs, as unit says) is over, on the bench server server. The counters
// are the server's since its start (or last reset) for that database; a database is fresh for
// each run, so they are the run's alone. A server without the module preloaded gives a
// profile that says how to get one.
func readStatementProfile(ctx context.Context, server, dbName, unit string, units int) statementProfile {
	p := statementProfile{unit: unit, units: units}
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		p.unavailable = fmt.Sprintf("cannot connect to the bench server: %v", err)
		return p
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		p.unavailable = fmt.Sprintf("pg_stat_statements is not available (%v)", err)
		return p
	}
	rows, err := conn.Query(ctx, `
		SELECT query, NOT toplevel, calls, total_exec_time, rows
		  FROM pg_stat_statements
		 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
		 ORDER BY total_exec_time DESC`, dbName)
	if err != nil {
		p.unavailable = cannotRead(err)
		return p
	}
	defer rows.Close()
	for rows.Next() {
		var (
			query     string
			nested    bool
			calls     int64
			totalMS   float64
			rowsTotal int64
		)
		if err := rows.Scan(&query, &nested, &calls, &totalMS, &rowsTotal); err != nil {
			p.unavailable = cannotRead(err)
			return p
		}
		if calls == 0 || units == 0 {
			continue
		}
		p.statements = append(p.statements, statementCost{
			query:     oneLine(query),
			nested:    nested,
			calls:     float64(calls) / float64(units),
			meanUS:    totalMS * 1000 / float64(calls),
			perUnitUS: totalMS * 1000 / float64(units),
			rows:      float64(rowsTotal) / float64(calls),
		})
	}
	if err := rows.Err(); err != nil {
		p.unavailable = cannotRead(err)
	}
	return p
}

// cannotRead says why pg_stat_statements could not be read, and what a server needs for it.
func cannotRead(err error) string {
	return fmt.Sprintf("pg_stat_statements cannot be read (%v); the server must preload it: "+
		"shared_preload_libraries = 'pg_stat_statements' (scripts/pg-local.sh sets it; restart its cluster "+
		"with scripts/pg-local.sh stop, then start)", err)
}

var (
	sqlComment = regexp.MustCompile(`--[^\n]*`)
	spaces     = regexp.MustCompile(`\s+`)
)

// oneLine is query without comments, its whitespace collapsed, cut to fit a line.
func oneLine(query string) string {
	q := strings.TrimSpace(spaces.ReplaceAllString(sqlComment.ReplaceAllString(query, ""), " "))
	const width = 96
	if len(q) > width {
		q = q[:width-3] + "..."
	}
	return q
}

// topLevelPerUnit is the database time per unit of the statements clients sent (those
// of triggers are inside them).
func (p statementProfile) topLevelPerUnit() float64 {
	var us float64
	for _, s := range p.statements {
		if !s.nested {
			us += s.perUnitUS
		}
	}
	return us
}

// print writes the profile: the statements taking the most time, each per unit; what says
// which run it is.
func (p statementProfile) print(w io.Writer, what string) {
	fmt.Fprintf(w, "Where a %s's database time goes on PostgreSQL (pg_stat_statements, %s):\n\n", p.unit, what)
	if p.unavailable != "" {
		fmt.Fprintf(w, "  not measured: %s\n\n", p.unavailable)
		return
	}
	total := p.topLevelPerUnit()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	per := strings.ToUpper(p.unit)
	fmt.Fprintf(tw, "CALLS/%s\tUS/CALL\tUS/%s\tSHARE\tROWS/CALL\tSTATEMENT\n", per, per)
	for i, s := range p.statements {
		if i == profileLines {
			break
		}
		share := fmt.Sprintf("%.0f%%", 100*s.perUnitUS/total)
		query := s.query
		if s.nested {
			share, query = "("+share+")", "[trigger] "+query
		}
		fmt.Fprintf(tw, "%.3f\t%.1f\t%.1f\t%s\t%.1f\t%s\n", s.calls, s.meanUS, s.perUnitUS, share, s.rows, query)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%.0f us of database time per %s in the statements clients sent (%d %ss; a trigger's statements are inside their caller's time, their shares in brackets).\n\n",
		total, p.unit, p.units, p.unit)
}
