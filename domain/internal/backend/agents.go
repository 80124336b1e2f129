package backend

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
)

// CheckAgentInfo checks what RegisterAgent needs of info.
func CheckAgentInfo(info domain.AgentInfo) error {
	if info.ID == "" {
		return &domain.FieldError{Field: "id", Msg: "must not be empty: pass the agent's --agent-id"}
	}
	if info.TTL < 0 {
		return &domain.FieldError{Field: "ttl", Msg: fmt.Sprintf("must not be negative, got %s: pass the agent's --agent-ttl", info.TTL)}
	}
	if info.LeaseTTL < 0 {
		return &domain.FieldError{Field: "lease_ttl", Msg: fmt.Sprintf("must not be negative, got %s: pass the agent's --lease-ttl", info.LeaseTTL)}
	}
	return nil
}

// AgentTTLMillis is the liveness bound RegisterAgent records for info, in milliseconds.
func AgentTTLMillis(info domain.AgentInfo) int64 {
	if info.TTL == 0 {
		return domain.DefaultAgentTTL.Milliseconds()
	}
	return max(info.TTL.Milliseconds(), 1)
}

// CheckAgentSession checks the id and session HeartbeatAgent and ResignAgent are given.
func CheckAgentSession(id string, session int64) error {
	if id == "" {
		return &domain.FieldError{Field: "id", Msg: "must not be empty: pass the agent's --agent-id"}
	}
	if session < 1 {
		return &domain.FieldError{Field: "session", Msg: fmt.Sprintf("must be at least 1, got %d: pass the session RegisterAgent returned", session)}
	}
	return nil
}

// CheckAgentAge checks a ttl or age ListAgents and PruneAgents are given, named field.
func CheckAgentAge(field string, d time.Duration) error {
	if d <= 0 {
		return &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be positive, got %s", d)}
	}
	return nil
}

// SessionEnded is the error of a heartbeat or resignation whose session moved on.
func SessionEnded(id string, session int64) error {
	return fmt.Errorf("agent %s session %d: %w (another process registered the same --agent-id, or the agent was removed after missing its heartbeats); register again", id, session, domain.ErrSessionEnded)
}

// CheckLeadershipClaim checks what ClaimLeadership is given.
func CheckLeadershipClaim(id string, session int64, ttl time.Duration) error {
	if err := CheckAgentSession(id, session); err != nil {
		return err
	}
	if ttl < time.Millisecond {
		return &domain.FieldError{Field: "ttl", Msg: fmt.Sprintf("must be at least 1ms, got %s: pass the agent's --agent-ttl", ttl)}
	}
	return nil
}

// CheckOverdue checks what OverdueResources is given.
func CheckOverdue(overdueFor time.Duration, limit int) error {
	return checkAgeAndLimit("overdueFor", overdueFor, "the agents' --agent-ttl", limit)
}

// CheckQuiet checks what QuietResources is given.
func CheckQuiet(quietFor time.Duration, limit int) error {
	return checkAgeAndLimit("quietFor", quietFor, "the watcher's gap timeout", limit)
}

// checkAgeAndLimit checks the age (named field, which callers pass from what source says)
// and the limit of a list of resources left behind.
func checkAgeAndLimit(field string, age time.Duration, source string, limit int) error {
	if age < 0 {
		return &domain.FieldError{Field: field, Msg: fmt.Sprintf("must not be negative, got %s: pass %s", age, source)}
	}
	if limit < 1 {
		return &domain.FieldError{Field: "limit", Msg: fmt.Sprintf("must be at least 1, got %d", limit)}
	}
	return nil
}
