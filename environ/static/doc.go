// Package static is the environ of a static pool: runtime hosts that were provisioned ahead of
// time and are listed in the provisioner's spec, each offering a number of slots.
//
// Provisioning a runtime reserves args.slots slots (1 to runtime.MaxSlots, the bound a host's
// slots have too) on one host of the pool; the runtime's config is that host's URL and
// audience and the resources of its slots (cpu_per_slot, memory_gb_per_slot and
// storage_bytes_per_slot times the slot count). The products are checked: a spec whose sizing
// times its largest host's slots overflows an int64 is refused, and a larger reservation left
// from before a spec change fails naming the sizing instead of getting a negative size.
// Deprovisioning releases the reservation. The environ never starts or stops anything on the
// hosts.
//
// # Placement
//
// A new runtime goes to a configured host with enough free slots, preferring the host that
// holds the fewest runtimes of the same owner (so one owner's runtimes spread across hosts and
// a lost host takes as few of them as possible), then the host with the most free slots, then
// the host listed first. A change of slot count resizes the reservation in place when its host
// has room and is refused otherwise: a runtime does not move between configured hosts behind
// its clients' back (the one exception is a runtime no client has yet, on a host that is
// down: see "A host that stays down"). When no host has room the error wraps
// domain.ErrNoCapacity, and the provisioner worker waits for slots to free up.
//
// # Hibernation
//
// Hibernate (environ.Hibernator) releases the runtime's reservation under the caller's lease
// and keeps in its state the host and slot count it had, marked hibernated; its config is
// kept by the caller. A hibernated runtime holds no slots: Capacity and Check count nothing
// for it, and CheckResource leaves it alone (a missing reservation is no drift for it; a
// check that finds a runtime's reservation missing while its row is paused or hibernating
// reserves nothing and says the row moved on, an error wrapping domain.ErrStale). Waking it
// is Reconcile: a new reservation goes back to the host it had when that host is configured,
// up and has room, even where a new runtime would go elsewhere, so that its clients' host
// and its data in the host's data_dir stay where they were; otherwise it is placed like a new
// runtime and its status message says "woken on H2: H, its host before hibernating, had no
// room" (or is down, or is no longer configured). Deprovisioning a hibernated runtime
// releases nothing and succeeds.
//
// # Spec changes
//
// The spec may change while runtimes hold slots (the agent reloads its provisioner set, or
// restarts with another), and the agent then reconciles every runtime of the provisioner (see
// ResourceSpec: a change of health probing alone reconciles none). Reconcile recomputes the
// config from the new spec (audience, per-slot sizing), and:
//
//   - a runtime whose host was removed from the spec is placed on a configured host like a new
//     one: its reservation moves, its config names the new host and its status message says
//     so. When no configured host has room it keeps its slots on the old host and waits for
//     room (domain.ErrNoCapacity).
//   - a host whose slots were cut below what is reserved on it keeps every reservation it
//     holds (nothing is evicted) and takes no new runtime and no growth until it has room
//     again.
//
// # No overfilling
//
// Reservations live in the slot store (domain.SlotStore), not in the environ. The store runs
// each reservation as one transaction, hands the pick policy the usage committed at that
// moment, and writes the pick only while the host, with every reservation committed by then,
// holds no more than the spec gives it (domain.SlotRequest.HostSlots); when another
// reservation filled the host first, the pick is made again on the new usage. So however many
// reconciles run at once, in one agent or in several agents sharing the database, the slots
// reserved on a host never exceed what the spec gives it. Reservations that name a host by
// another spelling of its URL (written before hosts were canonical, or by plain SQL) count
// against it in the pick and in the check alike, and one that grows moves to the host as
// configured. A host removed from the spec, or whose slots were cut, may hold more than the
// spec gives it until its runtimes move or are deleted; Check and Capacity report such hosts
// until then.
//
// # Host health
//
// Each host is probed with GET host+health_path (default /v1/ping; any 2xx answer is healthy)
// within health_timeout_seconds (default 5). A host whose latest probe failed is down: new
// runtimes are not placed on it, CheckResource fails for the runtimes on it, and Capacity
// marks it. Check probes every configured host, so a host without runtimes comes back up as
// soon as it answers. A probe result answers for its host for ten seconds, so checking many
// runtimes on few hosts costs a probe per host, not per runtime. The results live in the
// environ, not the database: each agent probes for itself. An explicit "health_path": ""
// turns probing off: every host counts as up.
//
// A host is a placement candidate only once a probe of it has succeeded. Right after start
// no host has answered yet, so Reconcile first probes every host it has never heard from,
// all at once, each within the probe timeout on the environ's clock and no longer than its
// context allows (a probe cut short by the caller says nothing, and the host stays
// unprobed). AwaitReady probes the host the runtime was placed on, so a runtime is reported
// ready only on a host that answers.
//
// # A host that stays down
//
// A served runtime (one with config: clients hold its host's URL, and its data is in the
// host's data_dir) is not moved off a host that goes down, however long it stays down: it
// keeps its reservation and may be resized in place, CheckResource fails for it (the
// resource turns unhealthy) and it is healthy again once the host answers. Moving it would
// change its clients' host behind their back and leave its data behind, and a host that
// restarts would send all its runtimes elsewhere. To move them, remove the host from the
// spec (see Spec changes) or delete the runtimes.
//
// An unserved runtime (no config yet: no client has been given its host) does not stay on a
// down host: its next attempt, after AwaitReady found the host down, places it like a new
// one on a host that is up, and its status message says "moved from H, which is down, to
// H2". When no host that is up has room it keeps its slots on the down host and waits for
// room (domain.ErrNoCapacity).
//
// # Checks in bulk
//
// Check sweeps the reservations of resources whose rows no longer exist (not those being
// deleted: their deprovision releases them). The slot store finds them with one query that
// returns the orphans alone, a page at a time, and Check and Capacity read what each host
// holds from the per-host sums the store keeps: neither lists the pool's reservations, so the
// leader's memory does not grow with them (a slot store without that summary has its
// reservations listed and their resources looked up in one go). The health
// checker prepares a page of CheckResource calls at once (PrepareChecks): the page's
// reservations are read in one query and answer for its checks for ten seconds, as old as
// the page's rows the checker compares them with. A reservation that query did not find is
// read again on its own before the check makes it again, so a runtime is never repaired on a
// stale read.
package static
