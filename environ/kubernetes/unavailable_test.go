package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/berth-dev/berth/environ"
)

func TestMarkUnavailableClassifiesWhatTheServerCouldNotServe(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	refused := &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	reset := &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	timeout := &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api", Err: &net.DNSError{Err: "i/o timeout", IsTimeout: true}}
	for _, tc := range []struct {
		name       string
		err        error
		class      environ.UnavailableClass // "" for not unavailable
		summary    string
		retryAfter time.Duration
	}{
		{"429 with Retry-After", apierrors.NewTooManyRequests("slow down", 4), environ.UnavailableThrottled, "429 Too Many Requests from the API server", 4 * time.Second},
		{"503 with the Retry-After header", apierrors.NewGenericServerResponse(503, "get", gr, "d", "", 2, true), environ.UnavailableServer, "503 Service Unavailable from the API server", 2 * time.Second},
		{"503", apierrors.NewServiceUnavailable("etcd is down"), environ.UnavailableServer, "503 Service Unavailable from the API server", 0},
		{"500", apierrors.NewInternalError(errors.New("boom")), environ.UnavailableServer, "500 Internal Server Error from the API server", 0},
		{"502", apierrors.NewGenericServerResponse(502, "get", gr, "d", "", 0, true), environ.UnavailableServer, "502 Bad Gateway from the API server", 0},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 3), environ.UnavailableTimeout, "500 Internal Server Error from the API server", 3 * time.Second},
		{"504 timeout", apierrors.NewTimeoutError("took too long", 0), environ.UnavailableTimeout, "504 Gateway Timeout from the API server", 0},
		{"connection refused", refused, environ.UnavailableConnection, "connection refused by the API server", 0},
		{"connection reset", reset, environ.UnavailableConnection, "connection to the API server reset", 0},
		{"no answer in time", timeout, environ.UnavailableTimeout, "no answer from the API server in time", 0},
		{"wrapped", fmt.Errorf("apply deployment: %w", apierrors.NewServiceUnavailable("x")), environ.UnavailableServer, "503 Service Unavailable from the API server", 0},
		{"RBAC denial", explainForbidden(denied("create", "apps", "deployments", "d", "berth")), "", "", 0},
		{"other 403", apierrors.NewForbidden(gr, "d", errors.New("exceeded quota")), "", "", 0},
		{"conflict", apierrors.NewConflict(gr, "d", errors.New("changed")), "", "", 0},
		{"invalid", apierrors.NewBadRequest("no"), "", "", 0},
		{"not found", apierrors.NewNotFound(gr, "d"), "", "", 0},
		{"the caller's deadline", fmt.Errorf("get: %w", &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}), "", "", 0},
		{"the caller's cancel", fmt.Errorf("get: %w", context.Canceled), "", "", 0},
		{"permanent", environ.Permanent(apierrors.NewServiceUnavailable("x")), "", "", 0},
		{"plain", errors.New("deployment d not ready within 5m0s"), "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := markUnavailable(tc.err)
			if !errors.Is(got, tc.err) || got.Error() != tc.err.Error() {
				t.Fatalf("markUnavailable changed the error: %v", got)
			}
			u, ok := environ.IsUnavailable(got)
			if tc.class == "" {
				if ok {
					t.Fatalf("marked unavailable (%+v), want unchanged", u)
				}
				return
			}
			if !ok {
				t.Fatalf("not marked unavailable, want %s", tc.class)
			}
			if u.Class != tc.class || u.Summary != tc.summary || u.RetryAfter != tc.retryAfter {
				t.Errorf("mark = {%s %q %s}, want {%s %q %s}", u.Class, u.Summary, u.RetryAfter, tc.class, tc.summary, tc.retryAfter)
			}
		})
	}
	if markUnavailable(nil) != nil {
		t.Error("markUnavailable(nil) is not nil")
	}
}
