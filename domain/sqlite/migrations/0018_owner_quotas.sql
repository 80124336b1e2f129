-- 0018: the SQLite dialect of the PostgreSQL migration of the same name: owner quotas.
--
--   * owner_quotas: one row per (owner, provisioner) with a cap; max_resources caps how many
--     of the owner's resources the provisioner holds, max_slots the sum of their units (the
--     environ's own unit: a runtime's slots); NULL leaves that measure uncapped. A quota
--     below the owner's usage is allowed: new admissions wait until the usage drops below it;
--   * resources.admitted_provisioner and admitted_units: the provisioner and the units the
--     agent admitted the resource at (NULL: not admitted). The owner's usage on a
--     provisioner is the count and sum of its admitted rows.

CREATE TABLE owner_quotas (
    owner         TEXT NOT NULL,
    provisioner   TEXT NOT NULL,
    max_resources INTEGER CHECK (max_resources >= 0),
    max_slots     INTEGER CHECK (max_slots >= 0),
    updated_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (owner, provisioner)
);

ALTER TABLE resources ADD COLUMN admitted_provisioner TEXT;
ALTER TABLE resources ADD COLUMN admitted_units INTEGER;

CREATE INDEX resources_admitted_idx ON resources (owner, admitted_provisioner, admitted_units)
    WHERE admitted_units IS NOT NULL;
