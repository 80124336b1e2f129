package domain_test

import (
	"context"
	"testing"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
)

// agentsStore is a memStore with an agents table.
type agentsStore struct {
	*memStore
	agents []domain.Agent
	ttl    time.Duration
}

func (s *agentsStore) ListAgents(_ context.Context, ttl time.Duration) ([]domain.Agent, error) {
	s.ttl = ttl
	return s.agents, nil
}

func TestLiveAgentsListsTheLiveOnes(t *testing.T) {
	ctx := context.Background()
	store := &agentsStore{memStore: newMemStore(), agents: []domain.Agent{{ID: "a", Live: false}, {ID: "b", Live: true}, {ID: "c", Live: true}}}
	live, err := domain.NewService(store, testTypes).LiveAgents(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 || live[0].ID != "b" || live[1].ID != "c" {
		t.Errorf("LiveAgents = %+v, want b and c", live)
	}
	if store.ttl != 20*time.Second {
		t.Errorf("LiveAgents asked with ttl %v, want the one given", store.ttl)
	}

	_, err = domain.NewService(newMemStore(), testTypes).LiveAgents(ctx, time.Second)
	if !jujuerrors.Is(err, jujuerrors.NotSupported) {
		t.Errorf("LiveAgents of a store without agents = %v, want NotSupported", err)
	}
}
