package domain

import (
	"context"
	"slices"
	"time"

	"github.com/juju/errors"
)

// AgentIdentity is who this agent is to the workers that act for it (the provisioner, the
// health checker, the leadership claim): the one place its id and liveness bound are
// checked, whichever worker is handed them.
type AgentIdentity struct {
	// ID is the agent's --agent-id: its row in the agents table, and the holder of the
	// resource leases it takes.
	ID string
	// TTL is the agents' --agent-ttl: an agent is live while its last heartbeat is younger.
	TTL time.Duration
}

// Validate reports an empty ID or a TTL that is not positive as NotValid, naming the flag
// that sets it.
func (a AgentIdentity) Validate() error {
	switch {
	case a.ID == "":
		return errors.NotValidf("empty agent ID (pass this agent's --agent-id)")
	case a.TTL <= 0:
		return errors.NotValidf("agent TTL %s (must be positive: pass the agents' --agent-ttl)", a.TTL)
	}
	return nil
}

// AgentInfo is what an agent registers with.
type AgentInfo struct {
	ID       string // the agent's identity, its --agent-id: the holder of its resource leases
	Version  string // the Berth release it runs
	HTTPAddr string // where it serves /healthz, /metrics and /debug/engine
	// TTL is how long the agent stays live after a heartbeat (its --agent-ttl); zero means
	// DefaultAgentTTL. A resource lease its id holds is void once the agent is not live.
	TTL time.Duration
	// LeaseTTL is how far each heartbeat renews the resource leases its id holds (its
	// --lease-ttl); zero renews none.
	LeaseTTL time.Duration
}

// DefaultAgentTTL is the liveness bound of an agent registered without a TTL.
const DefaultAgentTTL = 15 * time.Second

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
	// Leader says the agent holds the leadership lease (see LeadershipStore).
	Leader bool
	// Schema is the schema version the agent's build knows (0: it registered without
	// saying, a build from before schema version 13) and the database's: an agent whose
	// Schema.TooNew() claims no work and waits to be replaced.
	Schema SchemaVersions
	// Provisioners names the provisioners of the agent's set, sorted (SetAgentProvisioners);
	// empty for an agent of a build from before schema version 16, which does not say.
	Provisioners []string
}

// LiveAgentIDs returns the ids of the live agents among listed, sorted, with self among them
// even when its row is not listed live (it has just started, or its heartbeat is late): the
// set workers share their work over, so that self's share is never nobody's.
func LiveAgentIDs(listed []Agent, self string) []string {
	ids := []string{self}
	for _, a := range listed {
		if a.Live && a.ID != self {
			ids = append(ids, a.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// AgentStore is the membership of the agents sharing a store: each registers, heartbeats
// while it runs and resigns when it stops.
type AgentStore interface {
	// RegisterAgent records the agent with a heartbeat of now (database clock), its TTL and
	// LeaseTTL, and returns its session. Registering an id that is already registered (an agent restarted, or a
	// second process given the same id) starts a new session and resets the start and
	// heartbeat times. Each session of an id is greater than every earlier one, also after
	// the row was removed, unless the database clock goes back: it is the token that tells
	// the process that registered last from an older one still running.
	RegisterAgent(ctx context.Context, info AgentInfo) (session int64, err error)
	// HeartbeatAgent records a heartbeat of now (database clock) while the agent's row has
	// session and, in the same transaction, renews every resource lease its id holds to now
	// plus the LeaseTTL it registered with; otherwise (another process registered the same id, or the row was removed)
	// it gives an error wrapping ErrSessionEnded.
	HeartbeatAgent(ctx context.Context, id string, session int64) error
	// ResignAgent removes the agent's row (of that session) and clears every resource lease
	// its id holds, in one transaction that also logs a change of each of those resources,
	// so other agents' watchers hand them to their provisioners at once. When the
	// row is not at session it clears nothing and gives an error wrapping ErrSessionEnded:
	// the leases may be another process's of the same id.
	ResignAgent(ctx context.Context, id string, session int64) error
	// SetAgentProvisioners records names (the provisioners of the agent's set) on the
	// agent's row while it has session; otherwise it gives an error wrapping
	// ErrSessionEnded, as HeartbeatAgent does. ListAgents returns them sorted.
	SetAgentProvisioners(ctx context.Context, id string, session int64, names []string) error
	// ListAgents returns every registered agent, ordered by id; an agent is live while its
	// last heartbeat is younger than ttl.
	ListAgents(ctx context.Context, ttl time.Duration) ([]Agent, error)
	// PruneAgents removes the agents whose last heartbeat is older than olderThan and
	// returns how many.
	PruneAgents(ctx context.Context, olderThan time.Duration) (int64, error)
	// ResourcesOfDeadAgents lists the resources whose lease is held by a registered agent
	// that is not live (its last heartbeat is older than its own TTL): their leases are void,
	// and nothing else may tell another agent to take their work over.
	ResourcesOfDeadAgents(ctx context.Context) ([]string, error)
	// OverdueResources lists up to limit resources needing attention whose scheduled retry
	// is more than overdueFor past while no one holds their lease, oldest retry first. The
	// agent that scheduled such a retry let go of the resource and has not come back to it
	// (it stopped or died after releasing it): no change is logged for it, so nothing else
	// would tell another agent. A permanent failure schedules no retry and is never listed.
	OverdueResources(ctx context.Context, overdueFor time.Duration, limit int) ([]string, error)
	// QuietResources lists up to limit resources needing attention that have not been
	// written for quietFor while no one holds their lease and no retry is scheduled, least
	// recently written first. Every such resource waits for an agent to take it up, which
	// the change log's entry for its last write was to tell the agents; a resource still
	// listed long after that write is one whose entry a watcher never saw (a transaction that
	// stayed open longer than the watcher looked for its sequence number). A permanent
	// failure waits for its client, not an agent, and is never listed. Each comes with its
	// owner.
	QuietResources(ctx context.Context, quietFor time.Duration, limit int) ([]Attention, error)
}

// Term is one leadership lease as a claim granted it: the agent and the session it claimed
// under. The leader-only writes (pruning, capacity samples and warnings) carry it and apply
// only while it still holds, checked in their own transaction: a leader that paused past
// its lease (or was partitioned from the database) and resumes writes nothing once another
// agent took the lease over.
type Term struct {
	Holder  string
	Session int64
}

// LeadershipStore is the leadership lease: one agent at a time runs what must run once
// (environ checks, orphan sweeps, capacity samples and warnings, pruning). The lease follows
// the liveness rule of resource leases, on the database clock.
type LeadershipStore interface {
	// ClaimLeadership takes the lease for the agent's session when it is free, expired, or
	// held by a registered agent that is not live, and renews it when that session already
	// holds it; either way it then lasts ttl. It returns the holder after the claim and
	// whether that is this session. Of agents claiming at once, exactly one holds it.
	ClaimLeadership(ctx context.Context, agentID string, session int64, ttl time.Duration) (leader string, mine bool, err error)
	// ResignLeadership gives the lease up when the agent's session holds it, so that another
	// agent takes it at its next claim; otherwise it does nothing.
	ResignLeadership(ctx context.Context, agentID string, session int64) error
}
