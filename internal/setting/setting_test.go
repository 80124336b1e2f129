package setting_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/berth-dev/berth/internal/setting"
)

func TestAnErrorSaysTheSettingByNameOrFlag(t *testing.T) {
	flags := map[string]string{"P.LeaseTTL": "--lease-ttl", "P.ReconcileTimeout": "--reconcile-timeout", "P.ID": "--agent-id", "P.Concurrency": "--concurrency"}
	flag := func(name string) (string, bool) { f, ok := flags[name]; return f, ok }
	for _, tc := range []struct {
		err          *setting.Error
		named, flags string
	}{
		{
			setting.Invalid("Concurrency", 0, "must be at least 1"),
			"P.Concurrency 0 (must be at least 1) not valid",
			"--concurrency must be at least 1, got 0",
		},
		{
			setting.Invalid("LeaseTTL", 5*time.Minute, "must exceed %s: raise %s",
				setting.Ref{Name: "ReconcileTimeout", Value: 5 * time.Minute}, setting.Ref{Name: "LeaseTTL"}),
			"P.LeaseTTL 5m0s (must exceed P.ReconcileTimeout 5m0s: raise P.LeaseTTL) not valid",
			"--lease-ttl (5m0s) must exceed --reconcile-timeout (5m0s): raise --lease-ttl",
		},
		{
			setting.Invalid("ID", nil, "is empty: pass a name"),
			"P.ID (is empty: pass a name) not valid",
			"--agent-id is empty: pass a name",
		},
		{
			// A setting no flag sets keeps its name; another one shows as its value.
			setting.Invalid("LeaseTTL", time.Hour, "must be less than %s", setting.Ref{Name: "PruneAfter", Value: time.Minute}),
			"P.LeaseTTL 1h0m0s (must be less than P.PruneAfter 1m0s) not valid",
			"--lease-ttl (1h0m0s) must be less than 1m0s",
		},
		{
			setting.Invalid("Addr", "x", "must be HOST:PORT, e.g. %s", setting.Ref{Name: "Fraction", Value: 0.8}),
			`P.Addr "x" (must be HOST:PORT, e.g. P.Fraction 0.8) not valid`,
			`P.Addr ("x") must be HOST:PORT, e.g. 0.8`,
		},
	} {
		err := tc.err.In("P")
		if got := err.Error(); got != tc.named {
			t.Errorf("Error() = %q; want %q", got, tc.named)
		}
		if got := err.Says(flag); got != tc.flags {
			t.Errorf("Says() = %q; want %q", got, tc.flags)
		}
		wrapped := fmt.Errorf("worker: %w", err)
		var invalid *setting.Error
		if !jujuerrors.Is(wrapped, jujuerrors.NotValid) || !errors.As(wrapped, &invalid) || invalid.Name != err.Name {
			t.Errorf("%v: want NotValid and a *setting.Error named %s", wrapped, err.Name)
		}
	}
	// In leaves the error it names anew as it was.
	e := setting.Invalid("Concurrency", 0, "must be at least 1")
	_ = e.In("P")
	if e.Name != "Concurrency" {
		t.Errorf("In renamed its receiver: %s", e.Name)
	}
}
