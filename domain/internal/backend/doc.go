// Package backend holds what Berth's two SQL state backends (domain/postgres and
// domain/sqlite) share beyond their dialects: the checks of a call's input, the errors that
// explain why a guarded write matched no row, how the embedded migrations are found and
// ordered, the resource list query, and how a store copy's rows are batched.
//
// What stays in each backend is what differs for a reason: the SQL each dialect needs, how
// values are stored (SQLite keeps times as text and JSON as text), and how concurrent writes
// are kept apart (row locks and checks after the write, or the file's write lock).
package backend
