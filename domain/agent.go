package domain

import (
	"context"
	"time"
)

// AgentInfo is what an agent registers with.
type AgentInfo struct {
	ID       string // the agent's identity, its --agent-id: the holder of its resource leases
	Version  string // the Berth release it runs
	HTTPAddr string // where it serves /healthz, /metrics and /debug/engine
}

// Agent is one registered agent as the agents table shows it. Live and HeartbeatAge are
// decided on the database clock, so agents whose clocks disagree see the same membership.
type Agent struct {
	ID       string
	Session  int64
	Version  string
	HTTPAddr string

	StartedAt    time.Time
	HeartbeatAt  time.Time
	HeartbeatAge time.Duration
	// Live says the last heartbeat is younger than the ttl ListAgents was given.
	Live bool
	// LeasesHeld counts the live resource leases the agent's id holds.
	LeasesHeld int
}

// AgentStore is the membership of the agents sharing a store: each registers, heartbeats
// while it runs and resigns when it stops.
type AgentStore interface {
	// RegisterAgent records the agent with a heartbeat of now (database clock) and returns
	// its session. Registering an id that is already registered (an agent restarted, or a
	// second process given the same id) starts a new session and resets the start and
	// heartbeat times. Each session of an id is greater than every earlier one, also after
	// the row was removed, unless the database clock goes back: it is the token that tells
	// the process that registered last from an older one still running.
	RegisterAgent(ctx context.Context, info AgentInfo) (session int64, err error)
	// HeartbeatAgent records a heartbeat of now (database clock) while the agent's row has
	// session; otherwise (another process registered the same id, or the row was removed)
	// it gives an error wrapping ErrSessionEnded.
	HeartbeatAgent(ctx context.Context, id string, session int64) error
	// ResignAgent removes the agent's row (of that session) and clears every resource lease
	// its id holds, in one transaction, so other agents can take its work at once. When the
	// row is not at session it clears nothing and gives an error wrapping ErrSessionEnded:
	// the leases may be another process's of the same id.
	ResignAgent(ctx context.Context, id string, session int64) error
	// ListAgents returns every registered agent, ordered by id; an agent is live while its
	// last heartbeat is younger than ttl.
	ListAgents(ctx context.Context, ttl time.Duration) ([]Agent, error)
	// PruneAgents removes the agents whose last heartbeat is older than olderThan and
	// returns how many.
	PruneAgents(ctx context.Context, olderThan time.Duration) (int64, error)
}
