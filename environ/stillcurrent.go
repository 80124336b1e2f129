package environ

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-dev/berth/domain"
)

// StillCurrent is nil when resource r's row, read again through rows, is still as a check
// saw it at generation gen: not moved on, not being deleted, not paused, and asked to
// hibernate exactly when hibernated says it is. Otherwise it says what moved, wrapping
// domain.ErrStale: a check repairs nothing on a row that moved on under it. Without rows it
// cannot tell and lets the repair go ahead.
func StillCurrent(ctx context.Context, rows ResourceGetter, r *Resource, gen int64, hibernated bool) error {
	if rows == nil {
		return nil
	}
	now, err := rows.GetResource(ctx, r.ID)
	if errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("%s %s no longer exists; nothing repaired (%w)", r.Type, r.ID, domain.ErrStale)
	}
	if err != nil {
		return fmt.Errorf("%s %s: look it up before repairing: %w", r.Type, r.ID, err)
	}
	switch {
	case now.Generation != gen || now.Status == domain.StatusDeleting:
		return fmt.Errorf("%s %s moved on while checked (now %s at generation %d, checked generation %d); nothing repaired (%w)", r.Type, r.ID, now.Status, now.Generation, gen, domain.ErrStale)
	case now.Paused:
		return fmt.Errorf("%s %s was paused while checked; nothing repaired (%w)", r.Type, r.ID, domain.ErrStale)
	case now.Hibernate != hibernated:
		return fmt.Errorf("%s %s was asked to hibernate or wake while checked; nothing repaired (%w)", r.Type, r.ID, domain.ErrStale)
	}
	return nil
}
