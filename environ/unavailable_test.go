package environ_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/environ"
)

func TestUnavailableIsFoundThroughWrapping(t *testing.T) {
	base := errors.New("the server is currently unable to handle the request")
	err := fmt.Errorf("reconcile: %w", environ.Unavailable(base, environ.UnavailableServer, "503 Service Unavailable from the API server", 3*time.Second))
	u, ok := environ.IsUnavailable(err)
	if !ok {
		t.Fatalf("IsUnavailable(%v) = false", err)
	}
	if u.Class != environ.UnavailableServer || u.RetryAfter != 3*time.Second || u.Summary != "503 Service Unavailable from the API server" {
		t.Errorf("mark = %+v", u)
	}
	if !errors.Is(err, base) || err.Error() != "reconcile: "+base.Error() {
		t.Errorf("the mark changes the error: %v", err)
	}
}

func TestUnavailableEdgeCases(t *testing.T) {
	if environ.Unavailable(nil, environ.UnavailableTimeout, "", 0) != nil {
		t.Error("Unavailable(nil) is not nil")
	}
	if _, ok := environ.IsUnavailable(errors.New("plain")); ok {
		t.Error("a plain error is unavailable")
	}
	if _, ok := environ.IsUnavailable(environ.Permanent(environ.Unavailable(errors.New("x"), environ.UnavailableServer, "", 0))); ok {
		t.Error("a permanent error is unavailable")
	}
	u, _ := environ.IsUnavailable(environ.Unavailable(errors.New("x"), environ.UnavailableThrottled, "", -time.Second))
	if u.Summary != "throttled" || u.RetryAfter != 0 {
		t.Errorf("defaults: %+v", u)
	}
}
