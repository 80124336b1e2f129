package environ

import (
	"errors"
	"time"
)

// UnavailableClass says how a broker failed to answer, for the breaker's metrics and
// message.
type UnavailableClass string

// The classes of broker unavailability.
const (
	// UnavailableThrottled is a broker that refused the call for now (HTTP 429).
	UnavailableThrottled UnavailableClass = "throttled"
	// UnavailableServer is a broker that answered with a server error (HTTP 5xx).
	UnavailableServer UnavailableClass = "unavailable"
	// UnavailableTimeout is a call that got no answer in time.
	UnavailableTimeout UnavailableClass = "timeout"
	// UnavailableConnection is a connection refused or reset.
	UnavailableConnection UnavailableClass = "connection"
)

// UnavailableError marks an error as the broker being unavailable: the call failed because
// of the broker, not of the resource, and every resource of the provisioner would fail the
// same way for now. The provisioner counts it towards the provisioner's circuit breaker.
type UnavailableError struct {
	Class UnavailableClass
	// Summary is a short text for the breaker's message, e.g. "503 Service Unavailable
	// from the API server"; never a URL, a header or a credential.
	Summary string
	// RetryAfter is how long the broker asked callers to wait (Retry-After); 0 when it
	// did not say.
	RetryAfter time.Duration
	err        error
}

func (e *UnavailableError) Error() string { return e.err.Error() }
func (e *UnavailableError) Unwrap() error { return e.err }

// Unavailable marks err as the broker being unavailable, of class, summed up in summary
// (the class when empty), with the wait the broker asked for (0: none). A nil err stays nil.
func Unavailable(err error, class UnavailableClass, summary string, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	if summary == "" {
		summary = string(class)
	}
	return &UnavailableError{Class: class, Summary: summary, RetryAfter: max(retryAfter, 0), err: err}
}

// IsUnavailable returns the mark of an error that is, or wraps, one marked Unavailable. An
// error marked Permanent is never unavailable: the broker answered.
func IsUnavailable(err error) (*UnavailableError, bool) {
	var u *UnavailableError
	if !errors.As(err, &u) || IsPermanent(err) {
		return nil, false
	}
	return u, true
}
