package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The pool pings a connection idle past idlePing before handing it out, as pgxpool does by
// default, except to an acquisition marked withoutIdlePing.
func TestOnlyMarkedAcquisitionsSkipTheIdlePing(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		ctx  context.Context
		idle time.Duration
		want bool
	}{
		{ctx, idlePing / 2, false},
		{ctx, idlePing + time.Millisecond, true},
		{ctx, time.Hour, true},
		{withoutIdlePing(ctx), idlePing + time.Millisecond, false},
		{withoutIdlePing(ctx), time.Hour, false},
	} {
		if got := shouldPing(c.ctx, pgxpool.ShouldPingParams{IdleDuration: c.idle}); got != c.want {
			t.Errorf("shouldPing after %v idle (marked %v) = %v, want %v", c.idle, c.ctx != ctx, got, c.want)
		}
	}
}
