package postgres

import (
	"context"
	"errors"

	"github.com/berth-dev/berth/domain"
)

// errControlsPending stands in for the controls until their statements land.
var errControlsPending = errors.New("resource controls are not stored yet")

func (s *State) SetPaused(ctx context.Context, id string, paused bool) (domain.Resource, error) {
	return domain.Resource{}, errControlsPending
}

func (s *State) SetHibernate(ctx context.Context, id string, hibernate bool) (domain.Resource, error) {
	return domain.Resource{}, errControlsPending
}

func (s *State) RequestRetry(ctx context.Context, id string) (domain.Resource, error) {
	return domain.Resource{}, errControlsPending
}

func (s *State) SetLabels(ctx context.Context, id string, labels map[string]string) (domain.Resource, error) {
	return domain.Resource{}, errControlsPending
}

func (s *State) LatestEventSeq(ctx context.Context) (int64, error) { return 0, errControlsPending }

func (s *State) EventsAfter(ctx context.Context, after int64, limit int) ([]domain.Event, error) {
	return nil, errControlsPending
}

func (s *State) ListenEvents(ctx context.Context) (domain.ChangeListener, error) {
	return nil, errControlsPending
}
