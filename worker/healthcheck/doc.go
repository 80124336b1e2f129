// Package healthcheck is the worker that health-checks every provisioned resource, moving
// resources between ready and unhealthy and back. It runs on every agent, and the agents
// sharing a store share the resources' checks (see Shares); the checks of the environs
// themselves (and their orphan sweeps) run once, on the leader, in worker/environcheck.
//
// # Rounds
//
// Every Interval a round of resource checks starts. It checks every resource of this agent's
// share (see Shares) that is provisioned at its generation (ready or unhealthy), not being
// reconciled by another agent (see Reconciles) and created before the round started, read in
// pages of PageSize by id.
// Resources created during the round are left for the next one (counted as round-deferred
// in the report), so a round does not grow while it runs. The row's created_at (the
// database's clock) is compared with the round's start (the agent's): a database clock
// ahead of the agent's by S only leaves a new resource out for S longer.
//
// A round is paced to end within its interval. With N resources in its share (estimated
// when the round starts as the checkable resources over the agents, rounded up) the k-th
// check is due at
//
//	start + (k + rand) * Interval / N        rand uniform in [0, 1)
//
// so checks are spread evenly over the interval, each at a random point of its own slot,
// instead of arriving in a burst. Each slot is the time left until the round's end shared
// among the checks still expected, so when more resources turn up than were counted (ones
// that became ready during the round), the round counts again, shares what is left of the
// interval among the rest, and checks them at a faster pace (of the resources it has not read
// yet it then expects the fraction of its share among those it has read); no check is due
// after the
// round's end. At most Concurrency checks run at once; a check due while all are busy waits
// for one to end. Only then can a round overrun its interval (checks too slow for the
// concurrency): it ends when its last page is read, logging a warning when that was late by
// more than a tenth of the interval, and the next round starts at once.
//
// The report shows the round in progress (round-seq, round-started, round-ends,
// round-agents, round-share, round-resources, round-checked, round-skipped, round-deferred,
// round-unhealthy) and the one before it (last-round); each check counts in the round that
// started it, also when it ends in the next. round-agents is the live agents the round is
// shared among, round-share the resources of this agent's share read so far (its whole
// share once the round has read every page) and round-resources the checks it expects.
//
// # Shares
//
// At the start of each round the worker lists the agents sharing the store (on the database
// clock: an agent is live while its last heartbeat is younger than Agent.TTL) and checks only
// the resources whose rendezvous owner (internal/rendezvous: the live agent of the highest
// weight for the resource's id) it is. Every agent computes the same owners from the same
// set, so each resource is checked by one agent once per interval however many agents there
// are, and when an agent joins or leaves only the resources that agent wins or held change
// hands. On SQLite the one agent owns every resource.
//
// A round keeps the agents it started with; a change is seen by the next round, and logged.
// This agent counts itself in even when its row is not listed live (it has just started,
// or its heartbeat is late), so that its share is checked, at worst twice for a round. When
// the agents cannot be listed the round checks every resource, other agents' shares too
// (logged as a warning and shown as last-agents-error): a check made twice is harmless, one
// never made is not.
//
// An agent that stops gracefully resigns and leaves the listing at once: the others' next
// rounds take its share. One that dies is listed live until its last heartbeat is Agent.TTL
// old; the first round another agent starts after that checks its resources. They are
// checked again within about Agent.TTL plus two intervals of the dead agent's last heartbeat
// (one interval for a round in progress to end, one for the next to reach them), instead
// of once per interval.
//
// An environ that can prepare many checks at once (environ.CheckPreparer) is handed each page's
// resources of its own when the page is read, and those resources are checked through what it
// prepared (e.g. the static environ reads the page's slot reservations in one query instead
// of one per check), at their own due times as above. Checks of a page whose preparation
// failed, or whose environ the provisioner set replaced since, are made one at a time.
//
// # One check
//
//	ready ──── CheckResource fails ────► unhealthy ("health check failing since T: why")
//	  ▲                                      │
//	  └──── CheckResource passes again ──────┘ ("... passing again since T2 (failed since T)")
//
// Every record sets the resource's reason with its status: HealthCheckFailed while it is
// unhealthy, Recovered when it passes again (kept by later passing checks until the next
// reconcile), Available for a ready row that named no reason of ready yet, and UnreadableRow
// for a row recorded as error, not checked, because a column of it cannot be read
// (domain.Resource.Unreadable): the provisioner looks at it again until it is fixed.
//
// A check that fails because the broker itself is unavailable (an error marked
// environ.Unavailable: the Kubernetes API server throttles, fails or cannot be reached)
// says nothing of the resource: nothing is recorded and it is counted as an error, so an
// API server under a fault turns no ready resource unhealthy.
//
// A failing check never deprovisions anything. The state and config CheckResource returns
// (also along with an error) are saved, and the repairs it reports are recorded as the
// resource's repair events. Nothing is written when nothing changed. Every write is
// conditional on the generation checked and on the row still being ready or unhealthy, so an
// args change, a delete request or a reconcile that started meanwhile wins; the check's
// result is then dropped, all but its repairs: the environ made them, so they are recorded
// as repair events all the same (Store.RecordRepairs), in the status the resource has then.
// A repair's record that fails for another reason (the store unreachable, a timeout) is not
// dropped either: the drift it removed is gone, so no later check would find it again. The
// worker keeps such repairs in memory, up to 16 a resource (older ones are dropped, with a
// warning), and records them at the start of the next round, timed then (the report's
// unrecorded-repairs counts the resources with some kept); those of a resource gone since
// are dropped, and at the first the store still refuses the rest wait for the round after.
// A check of a resource with repairs kept records them first, ahead of its own, so the
// history keeps the order they were made in.
// A worker that stops with repairs kept loses them; each was logged at warn when its record
// failed.
//
// Paused and hibernated resources are not checked: the pages leave paused rows out, and a
// hibernated (or hibernating) resource is not ready. A check already running when its
// resource is paused, hibernated, deleted or changed may find it so: an environ that reads
// the row again before it repairs anything (both built-in environs do) then repairs nothing
// and fails with an error wrapping domain.ErrStale, and the check records nothing, is not
// counted in the metrics and counts as round-skipped. The environ is given the resource's
// labels with every check (environ.ResourceOptions.Labels).
//
// # Reconciles
//
// A check may repair what it checks, so it never runs while this agent's provisioner
// reconciles or deprovisions the same resource. Just before CheckResource a check takes the
// resource's lock in Locks (the set the provisioner shares) without waiting, and holds it
// until its outcome is recorded, so no reconcile starts between the check and its record.
// When the lock is held the resource is skipped for this round (logged at debug, counted as
// round-skipped in the report, and not counted in the metrics); the next round checks it
// again. A reconcile that starts while a check is in flight waits for the check to end.
//
// The lock guards one agent. Agents sharing a database are kept apart by the reconcile
// lease: the pages leave out every resource whose lease is live (on the database clock) and
// held by another holder than Agent.ID, this agent's (the provisioner's) lease identity, so a
// resource another agent is reconciling is not checked that round. A lease taken after its
// page was read is not seen; then, as for any reconcile that starts meanwhile, the generation
// and status conditions on every record, the environs' own generation guards and their orphan
// sweeps keep the check from undoing it.
//
// # Metrics
//
// Every check that runs to its end is counted once per provisioner by its result: error (the
// resource's provisioner is not in the set, or the outcome could not be recorded), unhealthy,
// repaired (passed once the environ repaired it) or healthy, in that order of precedence. A
// check whose row moved on is still counted by what it found (unless its environ said so,
// above); one cut short by the worker
// stopping is not. A resource whose provisioner column names no provisioner of the set is
// counted under metrics.Unknown, not under the name its row gives, so rows that clients
// write cannot add series.
package healthcheck
