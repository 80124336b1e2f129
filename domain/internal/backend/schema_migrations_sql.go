package backend

// The statements on schema_migrations that both dialects write alike.

// SchemaVersionSQL reads the schema's version: its newest migration's (0 for none).
const SchemaVersionSQL = `SELECT coalesce(max(version), 0) FROM schema_migrations`

// MigrationAppliedSQL reads whether migration $1 is applied.
const MigrationAppliedSQL = `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`

// RecordMigrationSQL records migration $1 as applied.
const RecordMigrationSQL = `INSERT INTO schema_migrations (version) VALUES ($1)`
