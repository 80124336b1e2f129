package external

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// maxAnswer bounds what the agent reads of an answer: a broker that floods is garbage too.
const maxAnswer = 4 << 20

// BrokerError is a call to a broker that failed: the broker refused it, answered garbage,
// did not answer in time or could not be reached. Class is the protocol's class it maps to;
// the error is marked for the provisioner accordingly (environ.Permanent,
// environ.Unavailable, domain.ErrNoCapacity, *domain.LeaseHeldError), so that a failing
// broker costs its resources a status, never the agent.
type BrokerError struct {
	Provisioner string
	Call        string // the protocol's call, e.g. "reconcile"
	Class       ErrorClass
	Msg         string
	cause       error
}

func (e *BrokerError) Error() string {
	return fmt.Sprintf("broker of provisioner %q: %s: %s", e.Provisioner, e.Call, e.Msg)
}

// Unwrap returns what the error wraps (a *domain.FieldError of a permanent refusal that
// named its field, the transport's error), if anything.
func (e *BrokerError) Unwrap() error { return e.cause }

// client makes the protocol's calls to one broker.
type client struct {
	provisioner string
	base        string // "http://broker" for a unix socket
	http        *http.Client
	tokenFile   string
	callTimeout time.Duration
	now         func() time.Time
}

// newClient returns a client of the broker spec names; socket is the unix socket of a
// started broker ("" for one dialed by spec).
func newClient(provisioner string, spec *Spec, socket string, now func() time.Time) (*client, error) {
	c := &client{provisioner: provisioner, tokenFile: spec.TokenFile, callTimeout: spec.callTimeout(), now: now}
	transport := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}
	switch {
	case socket != "" || spec.Socket != "":
		path := socket
		if path == "" {
			path = spec.Socket
		}
		dialer := &net.Dialer{}
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		}
		c.base = "http://broker"
	default:
		c.base = strings.TrimSuffix(spec.URL, "/")
		if spec.CAFile != "" {
			pem, err := os.ReadFile(spec.CAFile)
			if err != nil {
				return nil, &domain.FieldError{Field: "ca_file", Msg: fmt.Sprintf("cannot be read (%v): give a PEM file of the CAs that sign the broker's certificate", err)}
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, &domain.FieldError{Field: "ca_file", Msg: "holds no PEM certificate: give a PEM file of the CAs that sign the broker's certificate"}
			}
			transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		if spec.TokenFile != "" {
			if _, err := c.token(); err != nil {
				return nil, err
			}
		}
	}
	c.http = &http.Client{Transport: transport}
	return c, nil
}

// token reads the bearer token of token_file (a rotated token is used at the next call).
func (c *client) token() (string, error) {
	data, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return "", &domain.FieldError{Field: "token_file", Msg: fmt.Sprintf("cannot be read (%v): give a file holding the broker's bearer token", errors.Unwrap(err))}
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", &domain.FieldError{Field: "token_file", Msg: "is empty: write the broker's bearer token into it"}
	}
	return token, nil
}

// do makes call (a name for errors) to path with body (nil: GET) and decodes a successful
// answer into out. Every failure is a *BrokerError marked for the provisioner.
func (c *client) do(ctx context.Context, call, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	method, reader := http.MethodGet, io.Reader(nil)
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return c.fail(call, ClassPermanent, fmt.Sprintf("the request cannot be encoded: %v", err), err)
		}
		method, reader = http.MethodPost, bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, reader)
	if err != nil {
		return c.fail(call, ClassPermanent, fmt.Sprintf("the request cannot be made: %v", err), err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderProtocol, strconv.Itoa(ProtocolVersion))
	req.Header.Set(HeaderProvisioner, c.provisioner)
	if deadline, ok := ctx.Deadline(); ok {
		req.Header.Set(HeaderDeadline, deadline.UTC().Format(time.RFC3339Nano))
	}
	if c.tokenFile != "" {
		token, err := c.token()
		if err != nil {
			return c.fail(call, ClassUnavailable, err.Error(), err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(ctx, call, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return c.transportError(ctx, call, err)
	}
	if len(data) > maxAnswer {
		return c.garbage(call, fmt.Sprintf("the answer is larger than %d bytes", maxAnswer))
	}
	if resp.StatusCode/100 != 2 {
		return c.refusal(call, resp, data)
	}
	if err := decodeAnswer(data, out); err != nil {
		return c.garbage(call, fmt.Sprintf("the answer (%s) is not the protocol's JSON: %v", resp.Status, err))
	}
	return nil
}

// refusal is the error of an answer with a 4xx or 5xx status.
func (c *client) refusal(call string, resp *http.Response, data []byte) error {
	var body ErrorBody
	if err := json.Unmarshal(data, &body); err != nil || body.Error.Class == "" {
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			return c.fail(call, ClassUnavailable, resp.Status, nil)
		case resp.StatusCode >= 500:
			return c.fail(call, ClassUnavailable, resp.Status, nil)
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return c.fail(call, ClassUnavailable, resp.Status+": the broker refused the token of token_file", nil)
		}
		return c.garbage(call, fmt.Sprintf("answered %s without the protocol's error body", resp.Status))
	}
	detail := body.Error
	if !knownClasses[detail.Class] {
		return c.garbage(call, fmt.Sprintf("answered %s with error class %q, which protocol version %d does not have (its message: %s)", resp.Status, detail.Class, ProtocolVersion, clip(detail.Message)))
	}
	msg := clip(detail.Message)
	if msg == "" {
		msg = string(detail.Class)
	}
	var cause error
	if detail.Class == ClassPermanent && detail.Field != "" {
		cause = &domain.FieldError{Field: detail.Field, Msg: msg}
	}
	err := c.fail(call, detail.Class, msg, cause)
	if detail.Class == ClassUnavailable && detail.RetryAfterSeconds > 0 {
		var u *environ.UnavailableError
		if errors.As(err, &u) {
			u.RetryAfter = time.Duration(detail.RetryAfterSeconds * float64(time.Second))
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		var u *environ.UnavailableError
		if errors.As(err, &u) {
			u.Class = environ.UnavailableThrottled
		}
	}
	return err
}

// transportError is the error of a call that got no answer.
func (c *client) transportError(ctx context.Context, call string, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return c.mark(&BrokerError{Provisioner: c.provisioner, Call: call, Class: ClassUnavailable, Msg: "no answer before the call's deadline: the broker hangs or is overloaded", cause: context.DeadlineExceeded}, environ.UnavailableTimeout)
	case errors.Is(ctx.Err(), context.Canceled):
		return &BrokerError{Provisioner: c.provisioner, Call: call, Class: ClassRetryable, Msg: "cancelled", cause: context.Canceled}
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT):
		return c.mark(&BrokerError{Provisioner: c.provisioner, Call: call, Class: ClassUnavailable, Msg: "the broker is not listening (not started, or it crashed)", cause: err}, environ.UnavailableConnection)
	}
	return c.mark(&BrokerError{Provisioner: c.provisioner, Call: call, Class: ClassUnavailable, Msg: "the connection to the broker failed (it may have crashed): " + clip(err.Error()), cause: err}, environ.UnavailableConnection)
}

// garbage is the error of an answer the protocol does not allow: the broker is broken for
// every resource, so it counts as unavailable (the breaker opens, the resources retry).
func (c *client) garbage(call, msg string) error {
	return c.mark(&BrokerError{Provisioner: c.provisioner, Call: call, Class: ClassUnavailable, Msg: "protocol violation: " + msg}, environ.UnavailableServer)
}

// fail builds the *BrokerError of class and marks it.
func (c *client) fail(call string, class ErrorClass, msg string, cause error) error {
	return c.mark(&BrokerError{Provisioner: c.provisioner, Call: call, Class: class, Msg: msg, cause: cause}, environ.UnavailableServer)
}

// mark marks e for the provisioner by its class; unavailable is of class unavailableAs.
func (c *client) mark(e *BrokerError, unavailableAs environ.UnavailableClass) error {
	switch e.Class {
	case ClassPermanent, ClassNotSupported:
		return environ.Permanent(e)
	case ClassUnavailable:
		return environ.Unavailable(e, unavailableAs, "broker "+string(unavailableAs)+": "+clip(e.Msg), 0)
	case ClassNoCapacity:
		return fmt.Errorf("%w: %w", domain.ErrNoCapacity, e)
	case ClassStaleLease:
		return &staleLeaseError{BrokerError: e}
	}
	return e
}

// staleLeaseError is a call under an older lease than the resource's (the broker saw a
// newer one, or the row moved on while the broker worked): it wraps a
// *domain.LeaseHeldError, so that the provisioner drops the attempt as it drops one whose
// database write was fenced.
type staleLeaseError struct {
	*BrokerError
	holder string // the lease's holder now, "" when unknown
}

func (e *staleLeaseError) Unwrap() []error {
	return []error{e.BrokerError, &domain.LeaseHeldError{Holder: e.holder}}
}

// decodeAnswer decodes data into out, refusing trailing data. Unknown fields are ignored:
// a broker of a later minor revision of the protocol may add some.
func decodeAnswer(data []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(out); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// clip shortens a broker's text for a status message.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return s
}
