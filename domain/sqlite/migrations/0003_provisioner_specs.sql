-- The spec each provisioner last ran with. When it changes, the resources the provisioner
-- holds are bumped to a new generation so the agent reconciles them onto the new spec.
-- The SQLite dialect of the PostgreSQL migration of the same name.
CREATE TABLE provisioner_specs (
    provisioner TEXT NOT NULL PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    applied_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
