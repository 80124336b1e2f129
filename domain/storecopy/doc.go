// Package storecopy copies every row of one Berth store into another, of either kind
// (PostgreSQL or SQLite), without loss: what `berth migrate-store` runs to move an install
// from the embedded SQLite file to PostgreSQL, or back.
//
// What is copied: every resource with all its columns (ids, args, state, config, status,
// generations, retry bookkeeping, leases, health, times, and its admission against its
// owner's quota), every slot reservation, every event of the resources' history, the change
// log, the capacity samples and warnings, the provisioner spec fingerprints, the owners'
// policies (weights and metrics classes) and the owner quotas, with their keys and sequence
// numbers; and the position of the change log and of the history, so that what is written
// after the copy comes after what was copied. An owner's quota usage is the sum of its
// resources' admissions, so the resources admitted in the source count against the copied
// quotas at once. The slot usage by host and by owner, which the stores derive from the
// reservations, is not copied: each Target recomputes it from the copied reservations before
// its transaction commits. Nor are the agents registered in the source and their leader's
// term: membership is the running agents' own, and each agent registers in the store it runs
// on. Nor are PostgreSQL's client roles and their owner grants: set them up on the target
// with berth migrate --client-role and berth access, nor the secret name of the channel a
// PostgreSQL database announces new rows on: each database's migration makes its own. Nor
// is the brokers' runtime state: the shared rate budgets (broker_budgets) start full again on the target, at the first draw,
// and the circuit breakers (broker_breakers) start closed, so a broker that still fails
// opens its breaker again after its first failures. Times keep their milliseconds (SQLite's
// precision; PostgreSQL's microseconds are cut to milliseconds on the way into SQLite).
//
// How: the source is read in one consistent snapshot (a read-only transaction) and written
// into the target in one transaction in which the target's triggers do not fire, so rows
// arrive exactly as they were (an INSERT does not start a new history, bump a generation or
// log a change). The target must be empty, and every table is verified before the
// transaction commits: its row count, read back inside the transaction and by a count, and
// a checksum of its rows must equal the source's, or the copy fails and the target is left
// as it was. Each backend implements Store (domain/postgres, domain/sqlite); Copy does the
// rest.
//
// The source must not change while it is copied: writes made after the snapshot began are
// not copied. An agent on an SQLite file holds its lock and is refused by the command; on
// PostgreSQL the agents must be stopped by hand.
package storecopy
