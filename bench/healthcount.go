package main

// The health sweep's instruments: the metrics sink that says when a round is in, and the
// wrappers that count the checker's store calls and hold the environ check until asked.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/environ"
)

// sweepMetrics counts the checker's results and says when a round's worth is in.
type sweepMetrics struct {
	want    int
	started time.Time
	done    chan struct{}

	mu           sync.Mutex
	results      map[string]int
	total        int
	checksTook   time.Duration
	environDone  bool
	environTook  time.Duration
	environErr   error
	closedSignal bool
}

func newSweepMetrics(want int) *sweepMetrics {
	return &sweepMetrics{want: want, started: time.Now(), done: make(chan struct{}), results: make(map[string]int)}
}

func (m *sweepMetrics) ObserveHealthCheck(_, result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results[result]++
	m.total++
	if m.total == m.want {
		m.checksTook = time.Since(m.started)
	}
	m.signal()
}

// ObserveEnvironCheck is the environ checker's report of a Check; the gate reports the first
// Check's end instead, so that a second Check cut short at the stop is not measured.
func (m *sweepMetrics) ObserveEnvironCheck(string, error) {}

// environChecked notes the end of the round's environ Check.
func (m *sweepMetrics) environChecked(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.environDone, m.environTook, m.environErr = true, time.Since(m.started), err
	m.signal()
}

// signal closes done once the round is complete; the caller holds mu.
func (m *sweepMetrics) signal() {
	if !m.closedSignal && m.total >= m.want && m.environDone {
		m.closedSignal = true
		close(m.done)
	}
}

func (m *sweepMetrics) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		m.mu.Lock()
		defer m.mu.Unlock()
		return fmt.Errorf("%d of %d resources checked after %s (environ checked: %v)", m.total, m.want, timeout, m.environDone)
	}
}

func (m *sweepMetrics) environError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.environErr
}

func (m *sweepMetrics) snapshot() (results map[string]int, checks, environ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	results = make(map[string]int, len(m.results))
	for k, v := range m.results {
		results[k] = v
	}
	return results, m.checksTook, m.environTook
}

// roundGate holds back the second round: its first store call and its environ Check wait
// until the worker stops. It reports the end of the first round's environ Check.
type roundGate struct {
	counts, checks atomic.Int64
	environChecked func(error)
}

// callCounter counts store calls by method.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int64
}

func newCallCounter() *callCounter { return &callCounter{calls: make(map[string]int64)} }

func (c *callCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
}

func (c *callCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// countingStore is the checker's store, counted and gated.
type countingStore struct {
	st    *postgres.State
	calls *callCounter
	gate  *roundGate
}

func (s countingStore) CountResourcesByStatus(ctx context.Context) (map[domain.Status]int, error) {
	if s.gate.counts.Add(1) > 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.calls.add("CountResourcesByStatus")
	return s.st.CountResourcesByStatus(ctx)
}

func (s countingStore) ListCheckable(ctx context.Context, afterID string, limit int, holder string) ([]domain.Resource, error) {
	s.calls.add("ListCheckable")
	return s.st.ListCheckable(ctx, afterID, limit, holder)
}

func (s countingStore) RecordHealth(ctx context.Context, id string, checked domain.Checked, h domain.HealthUpdate) (domain.Resource, error) {
	s.calls.add("RecordHealth")
	return s.st.RecordHealth(ctx, id, checked, h)
}

func (s countingStore) RecordRepairs(ctx context.Context, id string, repairs []string) error {
	s.calls.add("RecordRepairs")
	return s.st.RecordRepairs(ctx, id, repairs)
}

// countingSlots is the environ's slot store, counted; it keeps the single-reservation
// lookup and the summaries the static environ prefers.
type countingSlots struct {
	st    *postgres.State
	calls *callCounter
}

// The sweep measures Check as the agent runs it, on the summaries.
var _ domain.SlotSummary = countingSlots{}

func (s countingSlots) ReserveSlots(ctx context.Context, req domain.SlotRequest, pick domain.PickHost) (domain.Reservation, error) {
	s.calls.add("ReserveSlots")
	return s.st.ReserveSlots(ctx, req, pick)
}

func (s countingSlots) ReleaseSlots(ctx context.Context, provisioner, resourceID string, lease *domain.Lease) error {
	s.calls.add("ReleaseSlots")
	return s.st.ReleaseSlots(ctx, provisioner, resourceID, lease)
}

func (s countingSlots) ListReservations(ctx context.Context, provisioner string) ([]domain.Reservation, error) {
	s.calls.add("ListReservations")
	return s.st.ListReservations(ctx, provisioner)
}

func (s countingSlots) GetReservation(ctx context.Context, provisioner, resourceID string) (domain.Reservation, error) {
	s.calls.add("GetReservation")
	return s.st.GetReservation(ctx, provisioner, resourceID)
}

// GetReservations keeps the batched lookup with which the static environ prepares a page of
// checks.
func (s countingSlots) GetReservations(ctx context.Context, provisioner string, resourceIDs []string) ([]domain.Reservation, error) {
	s.calls.add("GetReservations")
	return s.st.GetReservations(ctx, provisioner, resourceIDs)
}

// ReservedByHost and OrphanedReservations keep the summaries with which the static environ's
// Check reads usage and finds orphans, instead of listing every reservation.
func (s countingSlots) ReservedByHost(ctx context.Context, provisioner string) ([]domain.HostReservations, error) {
	s.calls.add("ReservedByHost")
	return s.st.ReservedByHost(ctx, provisioner)
}

func (s countingSlots) OrphanedReservations(ctx context.Context, provisioner, after string, limit int) ([]domain.Reservation, error) {
	s.calls.add("OrphanedReservations")
	return s.st.OrphanedReservations(ctx, provisioner, after, limit)
}

// countingResources is the environ's resource lookup, counted.
type countingResources struct {
	st    *postgres.State
	calls *callCounter
}

func (r countingResources) GetResource(ctx context.Context, id string) (domain.Resource, error) {
	r.calls.add("GetResource")
	return r.st.GetResource(ctx, id)
}

// MissingResources keeps the orphan sweep's batched lookup: one statement for up to 100,000
// ids, so for the whole sweep.
func (r countingResources) MissingResources(ctx context.Context, ids []string) ([]string, error) {
	r.calls.add("MissingResources")
	return r.st.MissingResources(ctx, ids)
}

// gatedEnvirons is the provisioner set whose environs' second Check waits for the stop.
type gatedEnvirons struct {
	set  *environ.Set
	gate *roundGate
}

func (g gatedEnvirons) Names() []string { return g.set.Names() }

func (g gatedEnvirons) Get(name string) (environ.Environ, string, error) {
	env, canonical, err := g.set.Get(name)
	if err != nil {
		return nil, canonical, err
	}
	return gatedEnviron{env, g.gate}, canonical, nil
}

type gatedEnviron struct {
	environ.Environ
	gate *roundGate
}

// PrepareChecks keeps the environ's preparation of a page of checks, which the health checker
// only uses through an environ that offers it.
func (e gatedEnviron) PrepareChecks(ctx context.Context, ids []string) (environ.PreparedChecks, error) {
	if preparer, ok := e.Environ.(environ.CheckPreparer); ok {
		return preparer.PrepareChecks(ctx, ids)
	}
	return e.Environ, nil
}

func (e gatedEnviron) Check(ctx context.Context) error {
	if e.gate.checks.Add(1) > 1 {
		<-ctx.Done()
		return ctx.Err()
	}
	err := e.Environ.Check(ctx)
	e.gate.environChecked(err)
	return err
}
