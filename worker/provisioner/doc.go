// Package provisioner is the worker that makes every resource match what its row asks for:
// it provisions new resources, brings changed ones to their new generation, retries failures
// with backoff and deprovisions deleted ones, through the resource's environ.
//
// # State machine
//
// The status column, with its reason, is the whole state machine (it is domain's, drawn
// here with the step of this worker that moves each edge; domain's package doc lists the
// reasons of each status). A reconcile reads the row under a lease, takes one path below,
// and records every step before the next, status and reason in the same write, so a
// restarted agent resumes from the row alone. The status message is for people: no code
// reads it back.
//
//	                row inserted
//	                     │
//	                     ▼
//	   ┌─────────────► pending ◄──────┐ retry finds no capacity again: stays pending
//	   │ no capacity     │   │        │ (Reconcile is called without recording
//	   │                 │   └────────┘ provisioning first)
//	   │                 │ reconcile starts, or a retry finds room
//	   │                 ▼
//	   └──────────── provisioning ◄──┐ transient failure: stays provisioning,
//	                 │    │     │    │ attempts+1, retried at next_attempt_at
//	       permanent │    │     └────┘
//	       failure   ▼    │ Reconcile, save state, AwaitReady
//	             error    ▼
//	                 │  ready (observed_generation = generation)
//	                 │    │
//	    args change  └────┴──► provisioning (at the new generation)
//
//	any status ── delete requested ──► deleting ── Deprovision, FinalizeDelete ──► row removed
//	                                    ▲    │
//	                                    └────┘ failure: stays deleting, retried with
//	                                           backoff whatever the error (giving up
//	                                           would leak what the resource holds)
//
//	any status but deleting
//	     │ hibernate set
//	     ▼
//	hibernating ◄──┐ failure: stays hibernating, attempts+1, retried at
//	  │   │   │    │ next_attempt_at whatever the error
//	  │   │   └────┘
//	  │   │ Hibernate; its state saved, the config kept
//	  │   ▼
//	  │ hibernated ── hibernate cleared (wake; from hibernating too) ──► provisioning
//	  │                                    ("waking generation N") ──► ready, as above
//	  │
//	  └──► error: the environ cannot hibernate (permanent: wake the resource or delete it)
//
// Paused is not a status: a paused row keeps whatever status it has and the agent does
// nothing to it (see below) until it is resumed.
//
// A permanent failure (unknown provisioner or an error the broker marks Permanent:
// BrokerError; a type the provisioner does not serve: UnknownType) is not retried while the
// generation stays. A resource waiting for capacity is retried after min(backoff,
// CapacityRetry), and at once when a deprovision by this agent frees room on the same
// provisioner. While it waits it stays pending with the reason WaitingForCapacity (the
// store keeps the time the wait began, waiting_since, while the reason stays) and the
// message "waiting for capacity: why": a retry calls Reconcile without first recording
// provisioning, and one that still finds no room rewrites the message only when the
// broker's reason changed. The row's attempts, next_attempt_at and last_error move on
// every retry, but its history (written on a change of status or message) gets one event
// for the whole wait, and the log one warning, not two of each per retry. retrypolicy.go
// is the whole policy: which status, reason, message, retry delay and metric outcome each
// kind of failure records.
//
// Admission: before Reconcile creates or grows a resource, the attempt admits it against its
// owner's quota on its provisioner (domain.QuotaStore's AdmitResource, under the attempt's
// lease), at its size as the environ tells it (environ.Sizer; 0 when it cannot). A resource
// admitted there at that size or more already passes without a lock; an owner without a
// quota there is admitted by the attempt's next record instead of a write of its own
// (domain.Admission.Defer), which saves a write of the row per create; a shrink lowers its
// admission once Reconcile applied it. An admission over quota (*domain.QuotaExceededError)
// is a wait like capacity: a create stays pending and a resize of a ready resource stays
// ready, serving its old size, both with the reason QuotaExceeded and the message "waiting
// for quota: why", retried after min(backoff, CapacityRetry), at once when this agent frees
// room on the provisioner, and when the quota changes (the store makes the owner's waiting
// retries due and logs a change of each). A retry that still finds the quota full keeps the
// row's message, so the whole wait is one history event; last_error says the usage now.
//
// A provisioner whose broker keeps failing (errors the environ marks environ.Unavailable)
// opens its circuit breaker, shared by every agent through the store: before calling the
// broker an attempt asks the breaker, and while it is open the resource keeps its status
// with the reason BrokerUnavailable and is retried at the breaker's next probe, attempts
// and backoff untouched; one attempt across the agents probes the broker, and its success
// wakes what waits here as freed room does. breaker.go has the whole of it.
//
// One reconcile of a claimed row, in order:
//
//   - paused: nothing at all (logged at debug), whatever the row asks for, a delete
//     included; no retry is scheduled. Resuming logs a change, so the row is taken up at
//     once, and what changed meanwhile (args, a delete request) is acted on then.
//   - next_attempt_at in the future: a retry scheduled earlier (perhaps by an agent that has
//     since stopped) is not due; schedule it for then and stop. "Future" is on the database's
//     clock, which wrote it: the claim tells the database's time (its lease ends LeaseTTL
//     after it), so an agent whose clock is off waits what is left of the backoff. An args change or a delete
//     request clears next_attempt_at, so new intent is acted on at once. A pending row with
//     a retry is waiting for capacity and is remembered as such; when this agent frees room
//     on its provisioner, the wait ends early.
//   - deleting: Deprovision with the saved broker state, then FinalizeDelete. A row that
//     never had a provisioner pinned nor broker state saved is removed directly.
//   - unreadable (a JSON column Berth cannot decode): error, looked at again with backoff.
//   - error with a last_error and no retry scheduled: a permanent failure at this
//     generation; nothing to do. (An args change, a retry request or a change of hibernate
//     clears last_error, so such a row is reconciled again.)
//   - hibernate set and hibernated: nothing to do (args or labels changed meanwhile are
//     applied on wake).
//   - hibernate set: hibernate. A row nothing was provisioned for (no provisioner pinned, no
//     broker state) is recorded hibernated at once. Otherwise the environ must implement
//     environ.Hibernator, else the row fails for good with a message naming the provisioner
//     and its type and saying to wake it (berth resource wake ID) or delete it; record
//     "hibernating generation N", call Hibernate, and record hibernated ("hibernated at
//     generation N") with the state it returns, the config kept, in the write that releases
//     the lease. A failure keeps the row hibernating ("hibernate attempt N failed: why;
//     retrying at T") and is retried with backoff whatever the error: the resource's data is
//     at stake either way.
//   - hibernate clear and hibernated or hibernating: wake, which is provision (below) with
//     the status message "waking generation N": the environ's Reconcile brings back what
//     Hibernate kept (the static pool's host, the Kubernetes workload's replicas).
//   - ready at its generation: nothing to do (health checks belong to another worker).
//   - otherwise provision: resolve the provisioner (pinning the default on the row when it
//     names none), check the type is supported, record "provisioning generation N"
//     (Provisioning; unless the row is waiting for capacity or quota on its pinned
//     provisioner), admit it against its owner's quota (see Admission above), call
//     Reconcile, record the broker state it returns at once ("...: waiting for it to
//     serve", AwaitingReady), AwaitReady, and record ready (Available) with the observed
//     generation, client config and attempts and last_error cleared.
//
// The claim is ClaimAndStart when the agent has a default provisioner: for a row nothing
// has been done to yet (pending with the reason Created, no retry scheduled) that the default
// provisioner provisions, the store records "provisioning generation N" and pins the
// provisioner in the claim's own write, decided on the row as claimed; the steps above then
// find it recorded and go on to Reconcile. Any other row is only claimed, and the steps
// record what they need. The row and its history end up the same either way; one round trip
// fewer.
//
// Every progress record is conditional on the generation the attempt read; when the row
// has moved on (args changed, delete requested) the database answers ErrStale and the
// resource is queued again at once, to be read afresh. The lease is released at the end
// of every attempt, even when the worker is being killed; if that fails, it expires. The
// last record of an attempt (ready, or the failure and its retry) releases it in the same
// write (ProgressUpdate.ReleaseLease); only an attempt that ends without such a record (a
// retry not due yet, nothing to do, a record that failed) releases it on its own.
//
// # Fenced writes
//
// A claim returns the lease it took, the holder and the row's lease token, which every claim
// bumps (a renewal by this agent included; heartbeats renew a lease without bumping it). The
// attempt carries that lease in every write: its progress records, FinalizeDelete, the
// release, and, through environ.Resource.Lease, the broker's own writes (the static pool's
// slot reservations). The store applies each only while the row still has that lease, so an
// attempt that paused past its agent's liveness and resumed after another agent (or another
// process of this agent's id) claimed the resource writes nothing more: the first refused
// write ends it with one warning, "lease lost to <holder>; this attempt's writes stop", and
// it records no failure and releases nothing (the lease is not its own any more); the
// resource is looked at again when the current holder's lease would end. A claim that takes
// over the lease of a holder that is no longer live (or whose lease expired) is logged,
// "took over resource from <holder> after <waited>", and counted (ObserveLeaseTakeover).
//
// # Health checks
//
// The health checker may repair a resource (re-apply its objects, reserve its slots again),
// so it must not check one while it is reconciled. Each attempt takes the resource's lock
// in Locks, the set this agent's health checker shares, before it claims the lease and gives
// it up after the lease is released: the whole claim, Reconcile or Deprovision and every
// record of the attempt run under it. A check in flight is waited for (it is bounded by its
// own timeout); the wait comes before the claim, so it uses neither the attempt's
// ReconcileTimeout nor its lease, and killing the worker ends it. The lock is held by
// attempts only: never while an id waits in the queue, for a retry or for capacity. Across
// agents the lease alone guards the row; see the health checker's package doc.
//
// # Queue and concurrency
//
// The loop owns a de-duplicated queue of ids, the set of ids in flight and a min-heap of
// (time, id) retries, with a single clock timer for the earliest retry. Watcher events
// and due retries enqueue ids; at most the limit's reconciles run at once, each in a
// goroutine the loop waits for before it returns, with a context that ends when the worker
// is killed or after ReconcileTimeout. An id that changes while its reconcile is in flight
// is marked dirty and queued again when that reconcile ends: one resource is never
// reconciled twice at once. Enqueueing an id drops its scheduled retry; the reconcile
// decides afresh. While queueHighWater ids are queued, or leftHighWater are left to other
// agents (below), the loop takes no watcher event, so a backlog waits in the watcher.
//
// The limit adapts (limit.go): it starts at InitialConcurrency (16) and, while a backlog
// keeps every place busy, grows fourfold (64, 256, 1,024) as long as each step raises the
// reconciles ended per second by 10%, up to Concurrency (1,024 by default); a step that does
// not pay is undone and tried again later, less often each time it fails. A step that raised
// the rate, but by less than 10%, is judged once more on the next window before it is
// undone: a burst's first few hundred milliseconds run at half the rate whatever the limit,
// and undoing a step on that one window held a burst of 10,000 at 64 or 256 for half a
// second (three bursts in eight, 12 to 35% slower than a run at a fixed 1,024 just before). Throughput is
// measured over windows of 100ms and a round of reconciles, but the floor's first window of a
// backlog and the window after a step that raised throughput by 30% end after 25ms and a
// round: those answers no noise overturns, and waiting out full windows kept a burst at the
// low limits, in small groups, for a fifth of a second. Once the backlog
// is done, or demand and not the limit sets the pace, the limit is back at 16. A broker
// that is faster with more in flight (the static pool's grouped writes, a broker that waits
// on a remote call) gets the places; one that a client rate limit caps (Kubernetes) gains
// nothing from them and stays at 16 but for a rare try, so that its calls wait in the fair
// queue, where owners take turns, and not at the limiter, where a health check would wait
// behind a burst. A Concurrency of 16 or less is the limit, fixed.
//
// The queue is fair between owners (internal/fairqueue): each owner's ids wait first in,
// first out, and the owners with ids queued take turns, each giving up to its weight of ids
// a turn (deficit round robin, every id costing one). An owner alone is served exactly in
// order; a newcomer is served within one round. The weights are the owners' policies
// (Config.Owners, read every OwnerPoliciesInterval; an owner without one has weight 1).
// The watcher takes the same turns in what it hands over, and reads ahead of the loop, so
// the loop holds little (queueHighWater, a few events) and an owner whose work arrives
// behind another owner's burst waits for that little, not for the burst. Retries, dirty
// ids and ids woken by freed capacity are queued again under their owner. The report
// lists the 20 owners with most queued (queue-depth-by-owner); the metrics count the depth
// by owner class (MetricsOwnerLabels: by owner).
//
// # Sharing with other agents
//
// Every agent's watcher reports every change. With Agents set, the loop routes each id of
// an event by its rendezvous owner among the live agents (internal/rendezvous, the hashing
// the health checks share by; the list is read again once it is ShareGrace old): ids it
// owns, and ids it has queued or in flight already, are queued at once; the others are left
// to their owner for ShareGrace, then looked at in one statement for many
// (UnclaimedResources) and queued only when they still need attention, are due and no live
// agent holds them: the owner was busy, or went away. A claim that finds another live
// agent's lease schedules nothing either: the resource is that agent's, and the watcher
// reports it again should that agent die or leave its retry overdue. Rendezvous spreads
// every owner's ids over the agents, so each agent's fair queue holds its share of every
// owner's work and the turns hold across agents as on one.
//
// # Retries
//
// After failed attempt n (the row's attempts column), the next is due after
//
//	delay = max(BackoffBase/2, rand * min(BackoffMax, BackoffBase * 2^(n-1)))
//
// with rand uniform in [0, 1): exponential backoff with full jitter and a floor. A resource
// waiting for capacity waits at most CapacityRetry. A lease held by another live agent
// leaves the resource to that agent, without a retry: agents share the work rather than
// fight over each row, and the watcher reports the resource again should that agent die
// (its leases are void) or release it with a retry it does not come back for within the
// agents' ttl. A lease held by any other holder is tried again when it expires. The retry time is stored in next_attempt_at, so a restarted worker
// (whose watcher's first events list every resource needing attention) keeps the schedule.
// The worker hands the store the delay (ProgressUpdate.RetryIn) and the database adds it to
// its own now: every agent compares next_attempt_at with that clock. The worker's clock only
// times its own requeue.
//
// # Observability
//
// Status messages and logs name the resource's id, provisioner, type and generation, and
// the error; they never include args, config or broker state. The environ is given the
// resource's labels (environ.ResourceOptions.Labels) with every Reconcile and Hibernate. (The few lines logged
// before the row is read, about its lease, can name only the id.)
//
// Every attempt that does something is reported to Metrics with its outcome (ready, retry,
// capacity, permanent, deleted, hibernated, stale, broker-unavailable) and its duration on
// the worker's clock; the queue's depth and the reconciles in flight are reported whenever they may have changed; and a
// resource's first ready reports its time from creation, from the row's own timestamps.
//
// Every attempt, whatever it does, is one span (SpanReconcile) from Config.TracerProvider,
// with the same names and its outcome (OutcomeNone when it did nothing) as attributes and
// a failure's error as its status; the environ's calls are its children, and the environ
// gets their context, so that its own spans nest under them. The attempt's log lines carry
// the span's trace_id and span_id.
package provisioner
