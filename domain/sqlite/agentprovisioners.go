package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// SetAgentProvisioners records the names of the agent's provisioner set, sorted, as a JSON
// array, while its row has session.
func (s *State) SetAgentProvisioners(ctx context.Context, id string, session int64, names []string) error {
	if err := backend.CheckAgentSession(id, session); err != nil {
		return err
	}
	sorted := slices.Sorted(slices.Values(names))
	if sorted == nil {
		sorted = []string{}
	}
	encoded, err := json.Marshal(sorted)
	if err != nil {
		return fmt.Errorf("record the provisioners of agent %s: %w", id, err)
	}
	n, err := s.exec(ctx, `UPDATE agents SET provisioners = $3 WHERE id = $1 AND session = $2`, id, session, string(encoded))
	if err != nil {
		return fmt.Errorf("record the provisioners of agent %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("record the provisioners of agent %s: %w", id, backend.SessionEnded(id, session))
	}
	return nil
}
