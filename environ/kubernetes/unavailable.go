package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-dev/berth/environ"
)

// markUnavailable marks err as the API server being unavailable (environ.Unavailable) when
// it says the server could not serve the call, whatever the resource: 429, a 5xx (500,
// 502, 503, 504, the server's own timeouts), a call with no answer in time, a connection
// refused or reset. The wait the server asked for (its Retry-After, which client-go puts in
// the error's details) is kept. Anything else is returned as it is: a 403 the authorizer
// gave (forbidden.go), a conflict, an invalid object, and the end of the caller's own
// context, which says nothing about the server.
//
// It classifies the error an environ call returns, not each HTTP answer: client-go already
// retries a 429 or 5xx that carries Retry-After (up to 10 times) and a call it then
// completed did not fail, so only what reaches the caller counts towards the breaker. One
// count per failed call keeps the breaker's writes to one per attempt, where counting at
// the transport would write for every answer in a storm of them.
func markUnavailable(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if _, ok := environ.IsUnavailable(err); ok || environ.IsPermanent(err) {
		return err
	}
	class, summary, ok := unavailableClass(err)
	if !ok {
		return err
	}
	var retryAfter time.Duration
	if seconds, ok := apierrors.SuggestsClientDelay(err); ok && seconds > 0 {
		retryAfter = time.Duration(seconds) * time.Second
	}
	return environ.Unavailable(err, class, summary, retryAfter)
}

// unavailableClass is the class and short summary of an error that says the API server
// could not serve a call; ok is false for any other error.
func unavailableClass(err error) (environ.UnavailableClass, string, bool) {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := int(status.Status().Code)
		switch {
		case apierrors.IsTooManyRequests(err):
			return environ.UnavailableThrottled, fromServer(http.StatusTooManyRequests), true
		case apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err):
			return environ.UnavailableTimeout, fromServer(code), true
		case code == http.StatusInternalServerError || code == http.StatusBadGateway ||
			code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
			return environ.UnavailableServer, fromServer(code), true
		}
		return "", "", false
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return environ.UnavailableConnection, "connection refused by the API server", true
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF):
		return environ.UnavailableConnection, "connection to the API server reset", true
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return environ.UnavailableTimeout, "no answer from the API server in time", true
	}
	return "", "", false
}

// fromServer is the summary of an HTTP answer of the API server with code, e.g. "503
// Service Unavailable from the API server".
func fromServer(code int) string {
	if code == 0 {
		return "a server error from the API server"
	}
	return fmt.Sprintf("%d %s from the API server", code, http.StatusText(code))
}
