package domain

import (
	"context"
	"time"
)

// CapacitySample is one provisioner's capacity at one time: of one host, or of all of them
// (Host "").
type CapacitySample struct {
	At          time.Time
	Provisioner string
	Host        string // "" for the provisioner's total
	Unit        string // e.g. "slots"
	Total       int64
	Used        int64
	Down        bool // the host fails its health checks
}

// Free is the capacity left, never negative.
func (s CapacitySample) Free() int64 { return max(s.Total-s.Used, 0) }

// CapacityTrend summarises one provisioner's (Host "") or host's samples over a period.
type CapacityTrend struct {
	Provisioner string
	Host        string
	Unit        string
	Samples     int
	MinUsed     int64
	MaxUsed     int64
	Oldest      CapacitySample
	Newest      CapacitySample
}

// CapacityWarning is the state of one kind of capacity warning of a provisioner.
type CapacityWarning struct {
	Provisioner string
	Kind        string // e.g. "total", "hosts", "no-usable-hosts"
	Active      bool
	Message     string
	Since       time.Time // when it last started or cleared
}

// CapacityStore records provisioners' capacity over time and their warnings.
type CapacityStore interface {
	// RecordCapacity stores samples while term holds (a sample already stored for the same
	// provisioner, host and time is kept); once term has ended it stores nothing and gives an
	// error wrapping ErrNotLeader.
	RecordCapacity(ctx context.Context, term Term, samples []CapacitySample) error
	// LatestCapacity returns each provisioner's newest samples, by provisioner, then host
	// (the total first).
	LatestCapacity(ctx context.Context) ([]CapacitySample, error)
	// CapacityTrends summarises the samples taken at or after since, per provisioner and
	// host, by provisioner, then host (the total first).
	CapacityTrends(ctx context.Context, since time.Time) ([]CapacityTrend, error)
	// PruneCapacitySamples deletes, while term holds, the samples taken more than olderThan
	// ago on the database clock, and returns how many (see ChangeLog.PruneChanges).
	PruneCapacitySamples(ctx context.Context, term Term, olderThan time.Duration) (int64, error)
	// SetCapacityWarning records w while term holds and reports whether its Active state
	// changed (a new warning counts as changed when active). Since is kept while Active
	// stays; Message is updated. Once term has ended it records nothing and gives an error
	// wrapping ErrNotLeader.
	SetCapacityWarning(ctx context.Context, term Term, w CapacityWarning) (changed bool, err error)
	// ListCapacityWarnings returns every warning's state, by provisioner, then kind.
	ListCapacityWarnings(ctx context.Context) ([]CapacityWarning, error)
}
