package backend

import (
	"strconv"
	"strings"

	"github.com/berth-dev/berth/domain"
)

// ListQuery is the query and arguments of ListResources: columns of the resources f matches,
// by created_at and then tiebreak (a column that orders rows created at the same time).
// Both dialects number their parameters $1, $2, ...
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
	if f.Limit > 0 {
		args = append(args, f.Limit)
		query += ` LIMIT $` + strconv.Itoa(len(args))
	}
	return query, args
}
