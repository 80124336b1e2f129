package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// SetAgentProvisioners records the names of the agent's provisioner set, sorted, while its
// row has session.
func (s *State) SetAgentProvisioners(ctx context.Context, id string, session int64, names []string) error {
	if err := backend.CheckAgentSession(id, session); err != nil {
		return err
	}
	sorted := slices.Sorted(slices.Values(names))
	if sorted == nil {
		sorted = []string{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE agents SET provisioners = $3 WHERE id = $1 AND session = $2`, id, session, sorted)
	if err != nil {
		return fmt.Errorf("record the provisioners of agent %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record the provisioners of agent %s: %w", id, backend.SessionEnded(id, session))
	}
	return nil
}
