// Package watcher turns the store's change log into batches of resource ids for workers to act on.
//
// The resources watcher starts by noting the newest change-log sequence number and sending,
// in its first events, every resource that needs attention (so nothing that changed while no
// agent ran is lost), read in pages of BatchSize ids: the first event is sent once the first
// page is read, so the first reconciles start after one page whatever the backlog. From then
// on it tails the change log from that cursor and sends the ids of every resource whose
// desired state changed. Every id is sent with its owner (Owned), looked up by id in the
// same read (one query per page); a resource whose row is gone has the owner "".
//
// # Owners take turns
//
// A burst of one owner must not delay another owner's change behind it. So the watcher
// reads ahead of its consumer, the pages of the resources needing attention and of the
// change log alike, up to ReadAhead ids held (default 100,000): a later owner's change is
// read while an earlier owner's backlog still waits. What it holds is one first-in
// first-out queue per owner, and each event (at most EventSize ids) takes the owners in
// weighted turns (internal/fairqueue; the weights are the owners' policies, read every
// OwnerPoliciesInterval): a late owner's change is in the next event. Beyond ReadAhead the
// watcher reads nothing more until the consumer takes some: what it reads next follows
// change order, and a change past the bound waits for the bound's worth of earlier work
// (raise ReadAhead for larger bursts; each id held costs some 150 bytes). Ids of
// dead agents' resources, overdue retries and filled gaps are held whatever the bound.
//
// # The newest entries, while behind
//
// Reading ahead still reads the log in order: a change that lands behind a burst of 8,000
// entries waited for the eight pages before it, 60 to 90 ms on a loaded 2-core machine.
// So while the cursor is behind (the last read filled a page, or there was no room), a
// wake-up or a poll first reads the log's newest entries (domain.ChangeLog.NewestChanges:
// up to 64, each looked at once) and queues those whose owner has no entry between the
// cursor and them: an owner with nothing unread before its change is served at once, and
// still in its change order (an owner with earlier changes unread waits for the pages, as
// before). The entries so queued are remembered until the cursor reaches them, and are not
// queued again then. The store looks for the owners' earlier entries only within 10,000
// entries of the cursor: further behind, nothing is queued ahead. At most 4,096 entries
// queued ahead wait for the cursor at a time. A wake-up while behind is taken before the
// other cases of the loop.
//
// # NOTIFY is only a hint
//
// The store can wake the watcher when it appends to the log (PostgreSQL LISTEN/NOTIFY), but a
// notification can be lost: the listening connection drops, the server restarts, or the hint
// arrives before the transaction that sent it is visible. So a wake-up only makes the watcher
// read sooner. It also reads every PollInterval and right after (re)listening, and it reads by
// sequence number, so a lost notification delays an event by at most one PollInterval and
// never drops it. A failing listener is closed, logged and re-opened after a backoff that
// doubles from one second up to thirty; the watcher keeps polling meanwhile. A failing read
// of the change log, on the other hand, kills the watcher: the dependency engine restarts it,
// and the new watcher starts again from the resources that need attention.
//
// # Announced entries
//
// A store may announce an entry with its resource's row as it wakes the watcher (PostgreSQL
// does for a resource created alone: see migration 0029 and domain.ChangeAnnouncer). The
// listener passes each announced entry to the loop, which queues it ahead of the cursor as
// it queues the log's newest entries, and sends it before the read that the wake-up after it
// asks for: the resource's reconcile starts without waiting for a round trip, on the row the
// store kept. The read from the cursor then skips the entry. An announcement is a hint like
// any other: one lost, or dropped because the loop has 256 waiting or 4,096 entries queued
// ahead, leaves its entry to the reads.
//
// # Dead agents
//
// A resource leased by an agent that died (kill -9, a lost host) may never change again, so
// no change-log entry would hand it to another agent. Every PollInterval the watcher also
// lists the resources leased by registered agents that are not live (their leases are void)
// and reports them like changed ones; once another agent claims one, it is no longer
// listed.
//
// # Overdue retries
//
// Agents share the work: an agent that finds a resource leased by another live agent leaves
// it to that agent, which schedules the resource's retries itself. Should that agent stop or
// die after releasing the lease with a retry scheduled, nothing would bring the resource
// back. So every PollInterval the watcher also lists up to BatchSize unleased resources whose
// retry is more than OverdueAfter past and reports them like changed ones.
//
// # Gaps
//
// Sequence numbers are taken when a transaction writes its log entry but become visible
// only when it commits, so entries can appear out of order: seq 7 may be readable while seq 6
// is not yet. Moving the cursor past 7 must not lose 6. Every sequence number the cursor
// skips is therefore remembered as a gap, with the time it was first seen, and looked up
// again on every read; when it shows up its resource is reported. A gap that stays empty for
// GapTimeout is taken to be a rolled-back transaction (which burns its number for good) and
// forgotten. At start, the BatchSize numbers below the cursor that are missing are gaps too,
// since a transaction that took one of them may still commit; of a longer run there (history
// the pruner removed) only the newest BatchSize are, so that a pruned log does not turn into
// millions of gaps. A run the cursor skips while it runs is remembered up to ReadAhead
// numbers (its newest): one transaction may hold a whole bulk insert's numbers open while a
// later one commits, and a bound of BatchSize lost all but the bulk insert's last page (of
// a burst of 8,000 runtimes with another owner's insert landing in it, 4,973 and 7,000 in
// two runs were never provisioned until the agent restarted). Gaps are looked up in chunks
// of 10,000.
//
// # Quiet resources
//
// A transaction that stays open across more than ReadAhead skipped numbers, or longer than
// GapTimeout (a client's BEGIN; INSERT ...; left open), goes unreported by the log: its
// number was given up on before it committed. So every GapTimeout the watcher also lists the
// resources needing attention that no agent holds or will retry and that have not been
// written for GapTimeout (a permanent failure, which waits for its client, aside), and
// reports them like changed ones: such a resource is reported within about two GapTimeouts
// of its commit. A backlog the agents are working through is listed too once it is that old
// (as many ids as there is room for ahead of the consumer, at least BatchSize); its ids join
// themselves where they wait, so it costs one query per GapTimeout.
//
// # Delivery
//
// Changed ids collect in the pending queues, and the next event is offered on Changes in
// the same select as everything else: a slow consumer gets coalesced events (each of at most
// EventSize ids, no id twice: a change to an id already held joins it where it waits), and
// a dying watcher never blocks on a send. A consumer waiting for an event gets it before
// the next read ahead; otherwise the reads ahead take turns with the sends in that select.
package watcher
