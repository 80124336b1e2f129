-- 0009: the SQLite dialect of the PostgreSQL migration of the same name: each resource row
-- counts the claims of its reconcile lease (lease_token), and the writes of an attempt
-- apply only while the row still has the token its claim returned.

ALTER TABLE resources ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
