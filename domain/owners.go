package domain

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// Owner weights: an owner with no policy has DefaultOwnerWeight; a policy's weight is
// between it and MaxOwnerWeight.
const (
	DefaultOwnerWeight = 1
	MaxOwnerWeight     = 1000
)

// ownerClassPattern is what an owner's metrics class may be: a short, label-safe word.
var ownerClassPattern = regexp.MustCompile(`^[a-z0-9-]{0,32}$`)

// OwnerPolicy is what the operator sets for one owner: its weight in the agents' fair queue
// (an owner of weight 3 is served three resources for each one of an owner of weight 1
// while both have work waiting) and its metrics class (the label its queue depth is counted
// under; "" is the default class).
type OwnerPolicy struct {
	Owner     string
	Weight    int
	Class     string
	UpdatedAt time.Time // set by the store
}

// Validate reports the first field of p that is not valid (a *FieldError, NotValid).
func (p OwnerPolicy) Validate() error {
	switch {
	case p.Owner == "":
		return &FieldError{Field: "owner", Msg: "must not be empty: name the owner the policy is for"}
	case p.Weight < DefaultOwnerWeight || p.Weight > MaxOwnerWeight:
		return &FieldError{Field: "weight", Msg: fmt.Sprintf("%d is out of range: give a whole number from %d to %d", p.Weight, DefaultOwnerWeight, MaxOwnerWeight)}
	case !ownerClassPattern.MatchString(p.Class):
		return &FieldError{Field: "class", Msg: fmt.Sprintf("%q is not a class: use up to 32 lower-case letters, digits and dashes (or nothing, for the default class)", p.Class)}
	}
	return nil
}

// OwnerSummary is one owner as `berth owners` lists it: every owner that has resources or a
// policy, with its policy (the defaults when it has none) and its resources.
type OwnerSummary struct {
	OwnerPolicy
	HasPolicy bool
	Resources int // rows it owns
	Queued    int // of them, those needing attention
}

// OwnerStore keeps the owners' policies. Clients may read them; the agent's role writes them.
type OwnerStore interface {
	// SetOwnerPolicy creates or replaces p.Owner's policy and returns it as stored; a p that
	// is not valid is a *FieldError.
	SetOwnerPolicy(ctx context.Context, p OwnerPolicy) (OwnerPolicy, error)
	// OwnerPolicy returns owner's policy (ErrNotFound when it has none).
	OwnerPolicy(ctx context.Context, owner string) (OwnerPolicy, error)
	// ListOwnerPolicies lists every policy, by owner.
	ListOwnerPolicies(ctx context.Context) ([]OwnerPolicy, error)
	// RemoveOwnerPolicy removes owner's policy (ErrNotFound when it has none): the owner
	// has the default weight and class again.
	RemoveOwnerPolicy(ctx context.Context, owner string) error
	// OwnerSummaries lists every owner that has resources or a policy, by owner.
	OwnerSummaries(ctx context.Context) ([]OwnerSummary, error)
	// ResourceOwners returns the owner of each of ids that exists; an id with no row (a
	// removed resource, or one that is not an id) is left out.
	ResourceOwners(ctx context.Context, ids []string) (map[string]string, error)
}

// OwnerWeights maps each owner with a policy to its weight, for the fair queues.
func OwnerWeights(policies []OwnerPolicy) map[string]int {
	out := make(map[string]int, len(policies))
	for _, p := range policies {
		out[p.Owner] = p.Weight
	}
	return out
}
