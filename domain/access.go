package domain

import "time"

// Access is what the role a store is opened with may do with Berth's tables, as `berth
// doctor` reports it. Only PostgreSQL has roles; see the README's client contract.
type Access struct {
	// Role is the role the connection acts as; TablesOwner the role that owns Berth's tables.
	Role        string
	TablesOwner string
	// Agent says the role acts as the agent: it owns the tables, is a member of their owner
	// or is a superuser, which the triggers tell by its holding TRIGGER on resources with
	// the grant option (no one else does unless the owner grants it, and a client role
	// loses it to berth migrate --client-role). The column guards do not apply to it.
	Agent     bool
	Superuser bool
	// Read, Create, Update and Delete are the role's rights on resources; ReadEvents on
	// resource_events (to follow a resource's status).
	Read, Create, Update, Delete, ReadEvents bool
	// OwnerIsolation says row-level security keeps each client role to the owners granted
	// to it; Owners are those granted to Role.
	OwnerIsolation bool
	Owners         []string
	// SchemaVersion is the highest schema migration applied.
	SchemaVersion int
}

// OwnerGrant says a client role acts for an owner when owner isolation is on.
type OwnerGrant struct {
	Role      string    `json:"role"`
	Owner     string    `json:"owner"`
	GrantedAt time.Time `json:"granted_at"`
}
