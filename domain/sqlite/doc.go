// Package sqlite is the embedded backend of Berth's storage contract (domain.State): one
// SQLite database file, no server. It suits a newcomer's first agent and a small install
// with one agent; several agents need the PostgreSQL backend (domain/postgres).
//
// It behaves as the PostgreSQL backend does (the contract suite in domain/statetest is run
// against both), and its schema is the same tables and columns, migration for migration
// (migrations/*.sql, embedded; see their comments for how each PostgreSQL type is stored).
// An older build on a file a newer build migrated is held back as with PostgreSQL: Migrate
// applies nothing, and the agent's writes that decide a resource's fate are refused
// (domain.SchemaStore).
//
// # Direct SQL is a first-class client
//
// As with PostgreSQL, triggers carry the rules, so a program that writes the file with plain
// SQL (the sqlite3 shell, a script) gets the behaviour the CLI gets: an args or labels change
// bumps generation and resets the retry bookkeeping, desired-state changes (the controls
// paused, hibernate and retry_requested_at included) are logged to change_log with the row's
// owner, a DELETE becomes a delete request, a started resource keeps its provisioner,
// status changes and controls are recorded as events, slot reservations keep the slot usage
// tables in step, and times written in any form SQLite reads are stored in the one sortable form. What PostgreSQL does with SET LOCAL berth.* (the agent's
// finalizing delete, a health check's writes) is done with a row in write_intents.
//
// # Connections
//
// The file is opened in WAL mode with a busy timeout and foreign keys on. This process's
// writes go through one connection, so they queue in Go rather than in SQLite's busy loop,
// and all of them, the agent's own bookkeeping (its registration and heartbeat, the
// leadership, budget draws) included, go through the group commit below;
// every write transaction begins IMMEDIATE, taking the file's write lock up front, so a
// transaction that read something never fails for a lock it needed later, and slot
// reservations made by concurrent reconciles (in this process or another) are serialised and
// never overfill a host. Concurrent writes share one transaction and one commit (group
// commit, each write in its own savepoint), so synchronous=FULL syncs the log once for many
// of them. A group that finds another process's write under way tries for the lock again
// on a schedule of its own, 50 us at first and at most 2 ms apart (writelock.go), where
// SQLite's busy handler sleeps 1, 2, 5, 10 and more ms: the wake-up for a client's commit
// waits for the lock (see below), so those sleeps were time between a client's insert and
// its reconcile. The savepoints' sub-journals are kept in memory (temp_store=MEMORY): they
// only undo a write within its group's transaction, which a crash rolls back whole anyway,
// and a temporary file took a write call for every page a savepoint first changed. Reads
// use a separate pool and run beside the writer. Every connection keeps the
// statements it ran prepared (stmtcache.go): parsing and planning a statement, and coding
// the triggers of the table it writes, would otherwise cost more than running it.
//
// A static runtime's way to ready is four such writes (the claim, which also starts
// provisioning; the slot reservation; the record of the broker's state; ready and release).
// The agent's UPDATEs of resources set updated_at (touchSQL) and status_changed_at
// (statusChangedSQL) as resources_after_update would, so that trigger's second UPDATE of the
// row, SQLite's stand-in for assigning to NEW, finds nothing to change and is left out: each
// of those UPDATEs writes the row once, and the claim and the progress records return it
// with RETURNING.
// BenchmarkProvisionStatic measures the four writes.
//
// A runtime nothing has been done to yet is provisioned in one write instead
// (domain.InstantProvision, instant.go); BenchmarkProvisionInstant measures it. The slot
// usage it picks a host on is read once, and per owner once, then kept as the groups'
// provisions reserve (usagememo.go): a group's transaction holds the write lock, so nothing
// else changes it meanwhile, and any other write of the group makes the next provision read
// it again. It is kept from one group to the next only while the writing connection's
// total_changes() and the file's data_version say nothing else wrote in between (a write
// of this process outside a group, or of any other connection or program).
//
// # Wake-ups without LISTEN/NOTIFY
//
// ListenChanges returns a listener woken by this State's own commits and, for writes made by
// other processes, by the file system's notice that the database's write-ahead log changed.
// Either is only a hint: the listener wakes its caller only when the change log has grown,
// and the watcher reads the durable change log as it does on PostgreSQL. ListenEvents does
// the same for resource_events.
//
// # One agent per file
//
// SQLite serialises writers, and a file on one machine is no place for several agents:
// LockAgent takes an exclusive lock on a file next to the database for the agent's life, so
// a second agent on the same file refuses to start. CLI commands do not take it and may use
// the file while the agent runs.
package sqlite
