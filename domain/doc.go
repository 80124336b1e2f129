// Package domain is Berth's model of a resource and the storage contract every backend meets.
//
// A resource is a row in the resources table: what a client asked for (type, name, owner,
// provisioner, args), what the agent has done about it (status, observed generation, the
// environ's private state and the client config) and the retry bookkeeping that lets a
// restarted agent pick up where the last one stopped.
//
// The status column is the reconcile state machine. Nothing else holds hidden state:
//
//	           create (row inserted)
//	                  │
//	                  ▼
//	 ┌──────────► pending ◄──────────────┐ no host has room: waits, retried
//	 │                │ reconcile starts  │ with backoff and when slots free
//	 │                ▼                   │
//	 │          provisioning ─────────────┘
//	 │           │   ▲   │ transient failure: stays provisioning,
//	 │           │   │   │ retried with backoff (attempts, next_attempt_at)
//	 │    ready  │   │   └──────┐
//	 │           ▼   │ args     ▼ permanent failure (invalid args,
//	 │         ready ┘ change   error   unknown provisioner, unsupported type):
//	 │         │   ▲            │       waits until the args change
//	 │  health │   │ health     └─ args change ─► provisioning
//	 │  check  ▼   │ check
//	 │  fails unhealthy passes    (still provisioned; never deprovisioned for
//	 │           │                 failing; an args change provisions it again)
//	 │           └─ args change ─► provisioning
//	 │
//	any status ── delete requested ──► deleting ── deprovisioned ──► row removed
//
// Every change of args bumps generation (a database trigger does it, so direct SQL writes count
// too); a resource is up to date when observed_generation equals generation and it is ready.
// A DELETE issued directly against the table is turned into a delete request by a trigger, so
// the environ always gets to free what it holds before the row goes.
//
// Every change of status or status message is recorded in the resource's history (EventLog)
// by the backend itself, so writes made directly against the table are recorded too.
package domain
