// Package postgres is the PostgreSQL backend of Berth's storage contract (domain.State).
//
// The schema lives in versioned SQL migrations embedded in the binary (migrations/*.sql).
// Migrate applies the pending ones, each in its own transaction that first takes a fixed
// advisory lock and re-reads schema_migrations, so agents starting together do not race.
// The newest embedded migration is the schema version the build knows: on a database a
// newer build migrated, Migrate applies nothing and says so, and the agent's claims,
// progress records, finalized deletes and leadership claims are refused in their own
// statements (domain.SchemaStore), so an older build acts on nothing it might misread.
//
// # Direct SQL is a first-class client
//
// Triggers carry the rules, so a client that writes the tables with plain SQL gets the same
// behaviour as the CLI:
//
//   - UPDATE of args or labels bumps generation and clears attempts, next_attempt_at and
//     last_error, as does a change of hibernate or retry_requested_at (without the bump);
//     hibernate cannot change on a row being deleted. Every UPDATE sets updated_at, and one
//     that changes status sets status_changed_at.
//   - INSERT, DELETE, and an UPDATE that changes generation, changes a set provisioner,
//     moves the row to deleting or changes paused, hibernate or retry_requested_at append an
//     entry to change_log and NOTIFY berth_resource_changes. The agent's own writes (status, state, config, leases, and
//     pinning a provisioner that was unset) log nothing, so the agent never wakes itself.
//     An INSERT's rows are logged, change log and 'created' events, once per statement
//     (migration 0024). Each entry carries the row's owner (a removal's: the removed row's;
//     migration 0028), so that the watchers' reads need not look it up.
//   - DELETE does not remove the row: it becomes a delete request (status deleting, reason
//     DeleteRequested, "delete requested"; so does an UPDATE to deleting that names no
//     reason), so the environ frees what it holds first. The agent removes the
//     row with FinalizeDelete, in a transaction that runs SET LOCAL berth.finalizing = 'on'.
//     An operator who must drop a row without deprovisioning it uses ForgetResource (berth
//     resource delete --force), which does the same as the agent's role and records who.
//   - INSERT, DELETE (a finalized one) and every UPDATE that changes status or
//     status_message append a row to resource_events (kind error for a failed attempt or
//     the error status). RecordHealth runs SET LOCAL berth.event_kind = 'health': its
//     status changes are health events and its message-only changes are not recorded.
//     Each change of paused, hibernate, retry_requested_at or labels adds a control event.
//     The one write the trigger leaves out is the agent's one-transaction provision (the
//     only write that moves lease_token on without taking a lease, a column clients cannot
//     write), whose statement inserts the same events itself (migration 0022). Events have
//     no foreign key and outlive a deleted resource until PruneEvents; each statement that
//     inserts events NOTIFYs berth_resource_events (ListenEvents), once per transaction.
//   - Leaving the unhealthy status, by any writer, clears unhealthy_since.
//   - Every INSERT, UPDATE and DELETE of slot_reservations keeps slot_host_usage (slots
//     reserved per host) and slot_owner_usage (reservations per owner and host) in step;
//     an INSERT's new reservations are counted once per statement (migration 0023).
//
// # Leases
//
// A reconcile holds a lease on the row (lease_holder, lease_expires_at, compared against the
// database clock, and lease_token, which every claim bumps). ClaimResource takes a free,
// expired or void lease or renews one's own, and says whose lease it took over; RecordProgress
// and FinalizeDelete apply only while the row still has the claim's holder and token, the
// lease is live and the row is at the generation the reconcile read, so a slow or
// partitioned agent cannot overwrite the work of the one that took over (nor of a later
// process of its own id), nor resurrect a resource whose args or deletion moved on.
// To save round trips, ClaimAndStart also records the start of provisioning of an untouched
// row (reason Created) in the claim's statement (deciding on the row as locked), and a RecordProgress with
// ReleaseLease clears the lease in the record's statement.
//
// # Slots
//
// ReserveSlots holds no lock across a provisioner. The host choice (made by the caller's
// PickHost inside the transaction) is shown the usage committed when the transaction read it,
// from slot_host_usage and slot_owner_usage (one row per host), not added up from the
// reservations. The reservations are written, and then, in the same round trip, every host
// they add slots to is checked against the slots the request gives it (hostRoomSQL): the
// write's trigger has updated the host's usage row, so the transaction holds that row's lock
// to its end and the check sees every reservation committed before it with its own, which is
// exactly what the host holds when it commits. A reservation of another transaction on the
// same host waits for that lock and is checked after it; one that finds its host filled
// since its pick is rolled back and picked again on the new usage. So no host is ever
// overfilled, by one agent or several, and reservations on different hosts never wait for
// each other. The transaction takes two pipelined round trips (open and read; write, check
// and commit). The first also locks the resource row FOR SHARE and reads its lease, so a
// reservation made under a lease the row no longer has (or under none while someone holds
// one) is rolled back before PickHost is asked; ReleaseSlots checks the same way in its own
// transaction.
//
// # Connections
//
// Open makes two pools from the URL: the main one (pool_max_conns, pgx's default of 4 or
// the machine's cores), which the reconciles' transactions, their groups and every other
// statement share, and one of a single connection for the change log's reads
// (LatestChangeSeq, ChangesAfter, ChangesIn, NewestChanges), opened on the first read. Those reads wake the
// reconciles: on the main pool, under a burst, each waited for a group's transaction to
// give its connection back (10 to 13 ms of a 1-row read, against 2 to 5 ms on its own
// connection). Each listener (ListenChanges, ListenEvents) takes one connection out of the
// main pool for good. An agent, with its one listener, so holds up to pool_max_conns + 2.
//
// The agent's main pool is warm (PoolConfig.Warm, warm.go): it opens its connections ahead,
// in the background (pool_min_conns is the pool's size unless the URL sets it), and runs on
// each, once open, the statements of a group of one-transaction provisions on no rows, in a
// transaction it rolls back. A server backend's first run of them loads the tables'
// descriptions, makes their plans and compiles the statement triggers they fire: the first
// group on each new connection took 17 to 28 ms where later ones take 2 to 5, and a burst
// that found an idle agent opened its connections on the way. On a warm pool the first
// group on a connection takes 5.5 to 11 ms (the rows' own triggers, which only a write
// compiles, account for the rest). It warms a connection only on the schema version the
// build knows; when Migrate applies migrations, it warms the idle connections again. The
// agent so holds pool_max_conns + 2 connections from its start (AgentConnections), and
// ConnectionLimitsBelow names a CONNECTION LIMIT of its role or database below that, which
// the agent's store warns of when it opens (domain/store).
//
// The agent's pools end a transaction left idle (PoolConfig.IdleInTransactionTimeout, which
// sets idle_in_transaction_session_timeout on each connection unless the URL sets it): a
// process stopped between two statements of a transaction keeps that transaction's row locks
// for as long as it stays stopped, and a heartbeat stopped before its commit so held every
// row its agent leased, and every other agent's claim of them waited, for as long as the
// agent stayed stopped (TestAStalledTransactionHoldsClaimsBackOnlyUntilItsIdleTimeout).
//
// # Plans
//
// The agent's statements run on the generic plans the server caches for them after a few
// runs, made for the tables as they were then. On a deployment that sat quiet, that is a
// small table, analyzed: a scan of it is the cheapest plan for a key. When one owner's burst
// then fills the table, the plans stay until autovacuum analyzes it again, up to a minute
// later, and each claim, progress record, read by id, change-log read and heartbeat scanned
// the whole table (TestKeyedStatementsReadByKeyOnPlansMadeOnAFewAnalyzedRows). So Open sets
// enable_seqscan off on every connection, and every plan reads by key where an index serves;
// and jit off, since a plan that must still scan a small table carries that setting's cost
// past every JIT threshold. A URL that sets either keeps its value. The statements that read
// a whole table, or may, on purpose (listings, counts by status and by owner,
// MissingResources, Export and Import, the migrations) allow sequential scans again for
// their own transaction (queryWhole, wholeTablePlansSQL), as before. A group's
// one-transaction provision turns sequential scans off itself (genericPlansSQL), whatever
// the URL says.
package postgres
