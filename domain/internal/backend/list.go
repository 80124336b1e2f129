package backend

import (
	"strconv"
	"strings"

	"github.com/berth-dev/berth/domain"
)

// ListQuery is the query and arguments of ListResources: columns of the resources f matches,
// by created_at and then tiebreak (a column that orders rows created at the same time).
// Both dialects number their parameters $1, $2, ... The query leaves f's label selector to
// the caller, which reads its rows with AppendSelected and ListFull: with a selector, the
// query has no limit, since the limit counts the rows the selector keeps.
func ListQuery(columns string, f domain.ListFilter, tiebreak string) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(column, value string) {
		if value != "" {
			args = append(args, value)
			where = append(where, column+" = $"+strconv.Itoa(len(args)))
		}
	}
	add("owner", f.Owner)
	add("type", string(f.Type))
	add("provisioner", f.Provisioner)
	add("status", string(f.Status))
	query := `SELECT ` + columns + ` FROM resources`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY created_at, ` + tiebreak
	if f.Limit > 0 && !selects(f) {
		args = append(args, f.Limit)
		query += ` LIMIT $` + strconv.Itoa(len(args))
	}
	return query, args
}

// selects reports whether f has a selector that may leave rows out.
func selects(f domain.ListFilter) bool { return f.Selector != nil && !f.Selector.Empty() }

// AppendSelected appends r to out when f's selector matches it.
func AppendSelected(out []domain.Resource, r domain.Resource, f domain.ListFilter) []domain.Resource {
	if r.MatchesSelector(f.Selector) {
		out = append(out, r)
	}
	return out
}

// ListFull reports whether out holds f's limit of rows, so that reading more is no use.
func ListFull(out []domain.Resource, f domain.ListFilter) bool {
	return f.Limit > 0 && len(out) >= f.Limit
}
