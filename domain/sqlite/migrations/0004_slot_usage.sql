-- 0004: slot usage kept by host, and by owner and host, beside the reservations. The SQLite
-- dialect of the PostgreSQL migration of the same name: a reservation reads one row per host
-- (and the requesting owner's rows) instead of adding up every reservation of the provisioner.
--
--   * slot_host_usage: the slots reserved on each host of each provisioner;
--   * slot_owner_usage: how many reservations each owner holds on each host.
--
-- They are derived from slot_reservations and kept by its triggers in the writing
-- transaction, so every writer, plain SQL included, keeps them right. A row whose sum drops
-- to zero is removed: a host (or owner on a host) without reservations has no row. A copy of
-- the store writes reservations with the triggers set aside and then recomputes both tables
-- from the reservations (as the two INSERTs at the end of this file do).

CREATE TABLE slot_host_usage (
    provisioner TEXT NOT NULL,
    host        TEXT NOT NULL,
    slots       INTEGER NOT NULL,
    PRIMARY KEY (provisioner, host)
);

CREATE TABLE slot_owner_usage (
    provisioner TEXT NOT NULL,
    owner       TEXT NOT NULL,
    host        TEXT NOT NULL,
    resources   INTEGER NOT NULL,
    PRIMARY KEY (provisioner, owner, host)
);

CREATE TRIGGER slot_reservations_usage_insert
AFTER INSERT ON slot_reservations
BEGIN
    INSERT INTO slot_host_usage (provisioner, host, slots) VALUES (NEW.provisioner, NEW.host, NEW.slots)
    ON CONFLICT (provisioner, host) DO UPDATE SET slots = slots + excluded.slots;
    INSERT INTO slot_owner_usage (provisioner, owner, host, resources) VALUES (NEW.provisioner, NEW.owner, NEW.host, 1)
    ON CONFLICT (provisioner, owner, host) DO UPDATE SET resources = resources + 1;
END;

CREATE TRIGGER slot_reservations_usage_delete
AFTER DELETE ON slot_reservations
BEGIN
    UPDATE slot_host_usage SET slots = slots - OLD.slots WHERE provisioner = OLD.provisioner AND host = OLD.host;
    DELETE FROM slot_host_usage WHERE provisioner = OLD.provisioner AND host = OLD.host AND slots = 0;
    UPDATE slot_owner_usage SET resources = resources - 1
     WHERE provisioner = OLD.provisioner AND owner = OLD.owner AND host = OLD.host;
    DELETE FROM slot_owner_usage
     WHERE provisioner = OLD.provisioner AND owner = OLD.owner AND host = OLD.host AND resources = 0;
END;

-- The old row's share out, the new row's in.
CREATE TRIGGER slot_reservations_usage_update
AFTER UPDATE OF provisioner, owner, host, slots ON slot_reservations
BEGIN
    UPDATE slot_host_usage SET slots = slots - OLD.slots WHERE provisioner = OLD.provisioner AND host = OLD.host;
    DELETE FROM slot_host_usage WHERE provisioner = OLD.provisioner AND host = OLD.host AND slots = 0;
    UPDATE slot_owner_usage SET resources = resources - 1
     WHERE provisioner = OLD.provisioner AND owner = OLD.owner AND host = OLD.host;
    DELETE FROM slot_owner_usage
     WHERE provisioner = OLD.provisioner AND owner = OLD.owner AND host = OLD.host AND resources = 0;
    INSERT INTO slot_host_usage (provisioner, host, slots) VALUES (NEW.provisioner, NEW.host, NEW.slots)
    ON CONFLICT (provisioner, host) DO UPDATE SET slots = slots + excluded.slots;
    INSERT INTO slot_owner_usage (provisioner, owner, host, resources) VALUES (NEW.provisioner, NEW.owner, NEW.host, 1)
    ON CONFLICT (provisioner, owner, host) DO UPDATE SET resources = resources + 1;
END;

INSERT INTO slot_host_usage (provisioner, host, slots)
SELECT provisioner, host, sum(slots) FROM slot_reservations GROUP BY provisioner, host;
INSERT INTO slot_owner_usage (provisioner, owner, host, resources)
SELECT provisioner, owner, host, count(*) FROM slot_reservations GROUP BY provisioner, owner, host;
