package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/juju/clock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/environ/external"
)

func TestBrokerVerifyFlagErrorsNameTheFlag(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--socket", "/s"}, "--type is missing"},
		{[]string{"--type", "widget"}, "give exactly one of --command"},
		{[]string{"--type", "widget", "--command", "b", "--socket", "/s"}, "give exactly one of --command"},
		{[]string{"--type", "widget", "--socket", "/s", "--token-file", "t"}, "--ca-file and --token-file go with --url"},
		{[]string{"--type", "widget", "--socket", "/s", "--args", "[1]"}, `--args "[1]" is not a JSON object`},
		{[]string{"--type", "widget", "--url", "http://broker.example.com"}, "url"},
	} {
		_, _, err := runBerth(clock.WallClock, append([]string{"broker", "verify"}, tc.args...)...)
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("broker verify %s: %v (exit %d); want exit %d and %q", strings.Join(tc.args, " "), err, exitCode(err), exitUsage, tc.want)
		}
	}
}

// widgets is a broker of widgets that checks their args: one that keeps the contract.
func widgets() *environtest.Hibernator {
	return &environtest.Hibernator{Environ: environtest.Environ{
		ReconcileFn: func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
			if err := environtest.Widget.Validate(opts.Args); err != nil {
				return nil, err
			}
			return &environ.Resource{ID: r.ID, Type: r.Type, State: map[string]any{}, Config: map[string]any{"url": "widget://" + r.ID}}, nil
		},
	}}
}

func TestBrokerVerifyPassesABrokerThatKeepsTheContract(t *testing.T) {
	clearEnv(t)
	srv := httptest.NewServer(&external.Adapter{Env: widgets(), Types: []domain.ResourceType{environtest.WidgetName}})
	defer srv.Close()
	out, _, err := runBerth(clock.WallClock, "broker", "verify", "--type", "widget", "--args", `{"size": 2}`, "--url", srv.URL)
	if err != nil {
		t.Fatalf("broker verify: %v\n%s", err, out)
	}
	if !strings.Contains(out, "PASS stale-lease-refused\n") || !strings.Contains(out, "PASS hibernate-and-wake\n") || strings.Contains(out, "FAIL") {
		t.Errorf("output:\n%s", out)
	}
}

func TestBrokerVerifyFailsABrokerThatTakesAnyArgs(t *testing.T) {
	clearEnv(t)
	srv := httptest.NewServer(&external.Adapter{Env: &environtest.Environ{}, Types: []domain.ResourceType{environtest.WidgetName}})
	defer srv.Close()
	out, _, err := runBerth(clock.WallClock, "broker", "verify", "--type", "widget", "--url", srv.URL)
	if exitCode(err) != exitFailed || !strings.Contains(err.Error(), "1 of ") {
		t.Fatalf("broker verify of a lax broker: %v (exit %d); want exit %d, one check failed\n%s", err, exitCode(err), exitFailed, out)
	}
	if !strings.Contains(out, `FAIL invalid-args-permanent: a reconcile with the unknown arg "berth-verify-unknown-arg" was not refused`) {
		t.Errorf("output:\n%s", out)
	}
}
