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
//	 │         ready ┘ change   error   unknown provisioner, unsupported type,
//	 │         │   ▲            │       more than the provisioner can ever hold):
//	 │         │   ▲            │       waits until the args change or a retry
//	 │  health │   │ health     └─ args change or retry ─► provisioning
//	 │  check  ▼   │ check
//	 │  fails unhealthy passes    (still provisioned; never deprovisioned for
//	 │           │                 failing; an args change provisions it again)
//	 │           └─ args change ─► provisioning
//	 │
//	 │  a resize with too little room free goes back to ready (ResizeWaitingForCapacity):
//	 │  it serves at observed_generation, and the resize is retried as a capacity wait
//	 │
//	 │  any status but deleting ── hibernate requested ──► hibernating ── failed attempt:
//	 │                                                     │    │      stays, retried
//	 │          environ cannot hibernate ─► error ◄────────┘    │      with backoff
//	 │          (permanent: wake or delete it)                  ▼ stopped, data kept
//	 │                                                     hibernated
//	 │          (no health check, repair or slots)              │
//	 │  hibernating or hibernated ── wake requested ──► provisioning ("waking
//	 │                                                  generation N") ──► ready
//	 │
//	any status ── delete requested ──► deleting ── deprovisioned ──► row removed
//
// Beside the status the agent writes, in the same statement, its reason: one CamelCase word
// from the status's closed list (Reason, ReasonsByStatus) that programs match on, while the
// status message says the same for people and no code reads it back. The reasons:
//
//	pending       Created             no attempt has touched the row yet; the claim starts
//	                                  these rows only
//	              WaitingForCapacity  its broker has no room; retried with backoff and when
//	                                  room frees (waiting_since: since when)
//	              QuotaExceeded       it would take its owner past a quota on its
//	                                  provisioner; retried when usage drops or the quota
//	                                  rises (waiting_since: since when)
//	              BrokerUnavailable   its provisioner's circuit breaker is open; retried
//	                                  when a probe finds the broker back (waiting_since)
//	provisioning  Provisioning        an attempt is creating, updating or waking it
//	              AwaitingReady       applied; waited on until it serves
//	              Backoff             an attempt failed; retried at next_attempt_at
//	              BrokerUnavailable   as for pending, part way through an attempt
//	ready         Available           serves, at its generation
//	              Recovered           its failing health check passes again
//	              ResizeWaitingFor-   new args need more room than is free: it serves at
//	              Capacity            observed_generation meanwhile; the resize is retried
//	                                  like a wait for capacity (waiting_since: since when)
//	              QuotaExceeded       a resize over its owner's quota: it serves at
//	                                  observed_generation meanwhile (waiting_since)
//	              BrokerUnavailable   a resize whose provisioner's circuit breaker is
//	                                  open: it serves at observed_generation meanwhile
//	unhealthy     HealthCheckFailed   its health check fails (unhealthy_since: since when)
//	error         BrokerError         a failure retrying cannot mend (invalid args, an
//	                                  environ that cannot hibernate): waits for new args or
//	                                  a retry asked for
//	              UnreadableRow       a column the agent cannot read; looked at again with
//	                                  backoff until someone fixes it
//	              UnknownType         no environ of the agent serves its type
//	              NeverFits           it asks for more than its provisioner can ever hold
//	                                  (its largest host, its quota): waits for new args, a
//	                                  retry, or a change of the provisioner's spec
//	deleting      DeleteRequested     a delete asked for (the CLI, a DELETE, or a move to
//	                                  deleting), being deprovisioned
//	              Backoff             a deprovision attempt failed; retried at next_attempt_at
//	              BrokerUnavailable   its provisioner's circuit breaker is open
//	hibernating   Hibernating         an attempt is stopping it, data kept
//	              Backoff             a hibernate attempt failed; retried at next_attempt_at
//	              BrokerUnavailable   its provisioner's circuit breaker is open
//	hibernated    Hibernated          stopped, data kept
//
// The times the state machine needs are columns too (StateTimes): waiting_since, kept while
// the reason stays one of the waiting reasons (WaitingReasons: WaitingForCapacity,
// ResizeWaitingForCapacity, QuotaExceeded, BrokerUnavailable) and cleared when it changes, and last_attempt_at, when
// the agent last recorded an attempt's outcome; both on the database's clock.
//
// Beside the status, a client controls the row with three more columns (plain SQL
// included), each recorded in its history as a control event:
//
//	paused              the agent leaves the row as it is, in any status: no reconcile,
//	                    no health check or repair, not even a delete; what was asked
//	                    meanwhile (new args, a delete) is carried out on resume
//	hibernate           the wish drawn above: true hibernates, false wakes; a row being
//	                    deleted keeps it (changing it then is refused)
//	retry_requested_at  a retry asked for: the backoff and a permanent failure are
//	                    cleared (attempts, next_attempt_at, last_error) and the agent
//	                    reconciles at once
//
// Every change of args or labels bumps generation (a database trigger does it, so direct SQL
// writes count too); a resource is up to date when observed_generation equals generation and
// it is ready.
// A DELETE issued directly against the table is turned into a delete request by a trigger, so
// the environ always gets to free what it holds before the row goes.
//
// A resource's type is a name (ResourceType): the environs declare the types they serve,
// with their args, and the agent's registry of environs is the catalog the Service checks a
// type and its args against (TypeCatalog). The schema keeps no list of types, statuses or
// event kinds, which the agent checks itself, so adding one needs no migration. A row whose
// type no environ of the agent serves (written with plain SQL) is listed and can be deleted;
// the provisioner fails it permanently (status error) with a message naming the type and the
// served ones.
//
// Every change of status or status message is recorded in the resource's history (EventLog)
// by the backend itself, so writes made directly against the table are recorded too.
//
// Owner quotas (Quota, QuotaStore) cap what one owner holds on one provisioner: a count of
// resources and a sum of units, the environ's own unit (a runtime's slots). The agent admits
// a resource against its owner's quota before its broker creates or grows it
// (AdmitResource): the admission is recorded on the row (admitted_provisioner,
// admitted_units) and lasts until the row is removed, a shrink lowering it once applied, so
// the owner's usage is the count and sum of its admitted rows. An admission that would go
// over answers a *QuotaExceededError and the resource waits with reason QuotaExceeded. The
// admission locks the quota's row, so admissions of one owner on one provisioner are
// serialized across every agent sharing the database; an owner without a quota there is
// admitted without a lock. A quota below the usage is allowed: nothing is evicted, new
// admissions wait. Only the agent's role writes quotas and admissions (the client contract).
package domain
