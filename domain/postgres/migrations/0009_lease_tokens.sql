-- 0009: fenced writes. Each resource row counts the claims of its reconcile lease:
--
--   * lease_token: bumped by every successful claim (a renewal by the same holder
--     included), never by a heartbeat's renewal. An attempt carries the token its claim
--     returned, and its progress records, slot reservations, finalize and release apply
--     only while the row still has it, so an agent that paused past its lease (or a
--     second process under the same agent id) writes nothing once another claim was made.

ALTER TABLE resources ADD COLUMN lease_token bigint NOT NULL DEFAULT 0;
