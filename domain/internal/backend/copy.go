package backend

import "github.com/berth-dev/berth/domain/storecopy"

// Rows is a query's result as both dialects' drivers give it.
type Rows interface {
	Next() bool
	Err() error
}

// EmitRows scans every row of rows and hands them to emit in batches of storecopy.BatchSize,
// each made by batch. The caller closes rows.
func EmitRows[T any, R Rows](rows R, scan func(R) (T, error), batch func([]T) storecopy.Batch, emit func(storecopy.Batch) error) error {
	buf := make([]T, 0, storecopy.BatchSize)
	for rows.Next() {
		row, err := scan(rows)
		if err != nil {
			return err
		}
		if buf = append(buf, row); len(buf) == storecopy.BatchSize {
			if err := emit(batch(buf)); err != nil {
				return err
			}
			buf = make([]T, 0, storecopy.BatchSize)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(buf) > 0 {
		return emit(batch(buf))
	}
	return nil
}
