package external

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ/internal/specjson"
)

// Defaults of a spec's optional fields.
const (
	// DefaultCallTimeoutSeconds bounds one call to the broker when the caller's own deadline
	// is later: a broker answers promptly and leaves long work to await-ready, which the
	// agent polls.
	DefaultCallTimeoutSeconds = 30
	// DefaultRestartMinSeconds and DefaultRestartMaxSeconds bound the backoff between
	// restarts of a broker the agent starts: it doubles from the first to the second with
	// every exit, and falls back to the first once the broker stayed up for the second.
	DefaultRestartMinSeconds = 1
	DefaultRestartMaxSeconds = 60
)

// Spec is the JSON spec of an external provisioner: the broker it starts (command) or dials
// (socket or url), and the resource types it serves. Exactly one of Command, Socket and URL
// is set.
type Spec struct {
	// Types are the resource types the broker serves. They are declared here, not only in
	// the broker's info, so that the CLI knows them without asking the broker; the agent
	// checks them against the info at the handshake.
	Types []string `json:"types"`
	// Hibernate says the broker hibernates resources (its info lists the hibernate
	// capability): the provisioner then hibernates and wakes them; without it, it refuses
	// to, naming the provisioner. Declared here, as Types, so that it is known without
	// asking the broker; the handshake checks it.
	Hibernate bool `json:"hibernate"`
	// Command starts the broker: the program and its arguments. The agent gives it the
	// path of a unix socket to listen on in the environment variable BERTH_BROKER_SOCKET,
	// and restarts it with backoff when it exits.
	Command []string `json:"command"`
	// Dir is the working directory of Command ("" is the agent's).
	Dir string `json:"dir"`
	// Socket is the unix socket of a broker something else runs.
	Socket string `json:"socket"`
	// URL is the https (or, for a broker on the loopback, http) address of a broker
	// something else runs; CAFile and TokenFile go with it.
	URL string `json:"url"`
	// CAFile is a PEM file of the CAs that sign the broker's certificate ("" is the
	// system's).
	CAFile string `json:"ca_file"`
	// TokenFile holds the bearer token the agent sends; it is read at every call, so that
	// it can be rotated in place. Its contents never appear in a log or an error.
	TokenFile string `json:"token_file"`
	// CallTimeoutSeconds bounds one call (DefaultCallTimeoutSeconds when 0).
	CallTimeoutSeconds int `json:"call_timeout_seconds"`
	// RestartMinSeconds and RestartMaxSeconds bound the restart backoff of Command.
	RestartMinSeconds int `json:"restart_min_seconds"`
	RestartMaxSeconds int `json:"restart_max_seconds"`
}

// ParseSpec decodes raw strictly and validates it; errors are *domain.FieldError naming the
// field and the fix. Defaults are filled in.
func ParseSpec(raw json.RawMessage) (*Spec, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, &domain.FieldError{Field: "spec", Msg: `is missing: give {"types": [...], "command": [...]} or "socket" or "url"`}
	}
	var s Spec
	if err := specjson.DecodeObject("spec", "", trimmed, []specjson.Field{
		{Name: "types", Dst: &s.Types},
		{Name: "hibernate", Dst: &s.Hibernate},
		{Name: "command", Dst: &s.Command},
		{Name: "dir", Dst: &s.Dir},
		{Name: "socket", Dst: &s.Socket},
		{Name: "url", Dst: &s.URL},
		{Name: "ca_file", Dst: &s.CAFile},
		{Name: "token_file", Dst: &s.TokenFile},
		{Name: "call_timeout_seconds", Dst: &s.CallTimeoutSeconds},
		{Name: "restart_min_seconds", Dst: &s.RestartMinSeconds},
		{Name: "restart_max_seconds", Dst: &s.RestartMaxSeconds},
	}); err != nil {
		return nil, err
	}
	if s.CallTimeoutSeconds == 0 {
		s.CallTimeoutSeconds = DefaultCallTimeoutSeconds
	}
	if s.RestartMinSeconds == 0 {
		s.RestartMinSeconds = DefaultRestartMinSeconds
	}
	if s.RestartMaxSeconds == 0 {
		s.RestartMaxSeconds = max(DefaultRestartMaxSeconds, s.RestartMinSeconds)
	}
	return &s, s.validate()
}

func (s *Spec) validate() error {
	if len(s.Types) == 0 {
		return &domain.FieldError{Field: "types", Msg: `is missing: list the resource types the broker serves, e.g. ["bucket"]`}
	}
	for i, t := range s.Types {
		if t == "" || strings.TrimFunc(t, isNameRune) != "" {
			return &domain.FieldError{Field: fmt.Sprintf("types[%d]", i), Msg: fmt.Sprintf("%q is not a type name: use lower-case letters, digits and dashes", t)}
		}
	}
	given := 0
	for _, set := range []bool{len(s.Command) > 0, s.Socket != "", s.URL != ""} {
		if set {
			given++
		}
	}
	if given != 1 {
		return &domain.FieldError{Field: "spec", Msg: `give exactly one of "command" (a broker the agent starts), "socket" (a unix socket) and "url" (https://...)`}
	}
	if len(s.Command) > 0 && s.Command[0] == "" {
		return &domain.FieldError{Field: "command[0]", Msg: "is empty: give the broker's program, e.g. [\"python3\", \"broker.py\"]"}
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return &domain.FieldError{Field: "url", Msg: fmt.Sprintf("%q is not an https:// URL", s.URL)}
		}
		if u.Scheme == "http" && !loopback(u.Hostname()) {
			return &domain.FieldError{Field: "url", Msg: "plain http is only for a broker on the loopback: use https:// (with ca_file) so that the token is not sent in clear"}
		}
	}
	if (s.CAFile != "" || s.TokenFile != "") && s.URL == "" {
		field := "ca_file"
		if s.CAFile == "" {
			field = "token_file"
		}
		return &domain.FieldError{Field: field, Msg: `goes with "url": a socket or a started broker is reached without TLS or token`}
	}
	switch {
	case s.CallTimeoutSeconds < 0:
		return &domain.FieldError{Field: "call_timeout_seconds", Msg: "must be positive"}
	case s.RestartMinSeconds < 0:
		return &domain.FieldError{Field: "restart_min_seconds", Msg: "must be positive"}
	case s.RestartMaxSeconds < s.RestartMinSeconds:
		return &domain.FieldError{Field: "restart_max_seconds", Msg: fmt.Sprintf("is %d: give at least restart_min_seconds (%d)", s.RestartMaxSeconds, s.RestartMinSeconds)}
	}
	return nil
}

func (s *Spec) callTimeout() time.Duration { return time.Duration(s.CallTimeoutSeconds) * time.Second }

func loopback(host string) bool {
	return host == "localhost" || host == "::1" || strings.HasPrefix(host, "127.")
}

func isNameRune(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-'
}
