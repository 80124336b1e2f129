// Package external is the environ of provisioner type external: a broker that runs in
// another process, written in any language, reached over Berth's broker protocol (version
// 1, HTTP/JSON, described by docs/brokers/external.openapi.yaml and
// docs/brokers/writing-a-broker.md).
//
// HTTP/JSON rather than gRPC: a broker then needs nothing but its language's standard
// library (Python's http.server, Node's http), and the protocol can be read, and a broker
// tried, with curl.
//
// # The broker
//
// A provisioner's spec either gives a command, which the agent starts (at the first call
// that needs it) with the path of a unix socket to listen on in BERTH_BROKER_SOCKET and
// restarts with exponential backoff whenever it exits (supervisor, owned by the environ and
// stopped by Close; its state shows in /debug/engine and in Check), or a broker something
// else runs: a unix socket, or an https URL with a CA file and a bearer token file (read at
// every call, never logged). The spec also declares the resource types the broker serves,
// so that the CLI knows them without asking the broker (DeclaredTypes); the handshake
// (GET /v1/info) checks them, and the protocol version, once per broker process.
//
// # Calls and failures
//
//	Environ          call                         lease   answer kept when
//	Reconcile        POST /v1/reconcile           yes     lease echoed and still the row's
//	AwaitReady       POST /v1/await-ready (poll)  yes     lease echoed
//	Deprovision      POST /v1/deprovision         yes     lease echoed and still the row's
//	Hibernate        POST /v1/hibernate           yes     lease echoed and still the row's
//	CheckResource    POST /v1/check-resource      no      -
//	Check            POST /v1/check               no      -
//	Capacity         GET  /v1/capacity            no      -
//
// Every call carries its deadline (Berth-Deadline, the earlier of the caller's and the
// spec's call_timeout_seconds) and is cancelled with its context. Every failure is a
// *BrokerError marked for the provisioner by its class:
//
//	broker's class / what happened         provisioner sees
//	permanent (names its field)            environ.Permanent: error/BrokerError
//	retryable                              a retried error: Backoff
//	no_capacity                            domain.ErrNoCapacity: WaitingForCapacity
//	stale_lease; a stale answer            *domain.LeaseHeldError: the attempt is dropped
//	unavailable, 5xx, 429                  environ.Unavailable: the circuit breaker
//	garbage (bad JSON, wrong version,      environ.Unavailable (server): the broker is
//	  unknown class, another lease echoed)   broken for every resource, which retry
//	no answer by the deadline              environ.Unavailable (timeout)
//	not listening, crashed mid-call        environ.Unavailable (connection)
//
// so that a broker that misbehaves costs its resources a status, never the agent.
//
// # Secrets
//
// Nothing secret crosses the protocol: the agent sends a resource's id, type, args, state
// and config, never a credential of its own (the token_file's token authenticates the
// agent to the broker, and goes in a header); a config a broker returns with a key named
// like a secret (password, token, dsn, ...) that is not a reference (_file, _ref, _path,
// _name) is refused as permanent.
//
// # Conformance
//
// Verify runs the conformance suite (berth broker verify) against any broker; Adapter
// serves the protocol for an environ of this agent, so that the built-in brokers are held
// to the same suite in tests.
package external
