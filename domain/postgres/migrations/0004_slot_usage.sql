-- 0004: slot usage kept by host, and by owner and host, beside the reservations.
--
-- A reservation shows its placement the usage of every host of the provisioner. Adding up
-- every reservation of the provisioner for that, while holding the provisioner's lock, made
-- each reservation cost more the more there were and kept the lock held meanwhile. These two
-- tables hold the sums instead, so a reservation reads one row per host (and the requesting
-- owner's rows):
--
--   * slot_host_usage: the slots reserved on each host of each provisioner;
--   * slot_owner_usage: how many reservations each owner holds on each host.
--
-- They are derived from slot_reservations and kept by its trigger in the writing transaction,
-- so every writer, plain SQL included, keeps them right. A row whose sum drops to zero is
-- removed: a host (or owner on a host) without reservations has no row. A copy of the store
-- writes reservations with the triggers off and then recomputes both tables with
-- berth_rebuild_slot_usage(), which anyone who wrote reservations with the triggers off can
-- call too.

CREATE TABLE slot_host_usage (
    provisioner text NOT NULL,
    host        text NOT NULL,
    slots       bigint NOT NULL,
    PRIMARY KEY (provisioner, host)
);

CREATE TABLE slot_owner_usage (
    provisioner text NOT NULL,
    owner       text NOT NULL,
    host        text NOT NULL,
    resources   bigint NOT NULL,
    PRIMARY KEY (provisioner, owner, host)
);

-- Adds a change of d_slots slots and d_resources reservations of owner o on host h of
-- provisioner p, removing rows that drop to zero.
CREATE FUNCTION berth_slot_usage_add(p text, o text, h text, d_slots bigint, d_resources bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    remaining bigint;
BEGIN
    INSERT INTO slot_host_usage AS u (provisioner, host, slots) VALUES (p, h, d_slots)
    ON CONFLICT (provisioner, host) DO UPDATE SET slots = u.slots + EXCLUDED.slots
    RETURNING u.slots INTO remaining;
    IF remaining = 0 THEN
        DELETE FROM slot_host_usage WHERE provisioner = p AND host = h;
    END IF;
    IF d_resources = 0 THEN
        RETURN;
    END IF;
    INSERT INTO slot_owner_usage AS u (provisioner, owner, host, resources) VALUES (p, o, h, d_resources)
    ON CONFLICT (provisioner, owner, host) DO UPDATE SET resources = u.resources + EXCLUDED.resources
    RETURNING u.resources INTO remaining;
    IF remaining = 0 THEN
        DELETE FROM slot_owner_usage WHERE provisioner = p AND owner = o AND host = h;
    END IF;
END
$$;

CREATE FUNCTION berth_slot_reservations_usage() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.provisioner = OLD.provisioner AND NEW.owner = OLD.owner AND NEW.host = OLD.host THEN
        IF NEW.slots <> OLD.slots THEN
            PERFORM berth_slot_usage_add(NEW.provisioner, NEW.owner, NEW.host, NEW.slots - OLD.slots, 0);
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM berth_slot_usage_add(OLD.provisioner, OLD.owner, OLD.host, -OLD.slots, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM berth_slot_usage_add(NEW.provisioner, NEW.owner, NEW.host, NEW.slots, 1);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER slot_reservations_usage
    AFTER INSERT OR UPDATE OR DELETE ON slot_reservations
    FOR EACH ROW EXECUTE FUNCTION berth_slot_reservations_usage();

-- Recomputes both tables from slot_reservations.
CREATE FUNCTION berth_rebuild_slot_usage() RETURNS void
LANGUAGE sql AS $$
    DELETE FROM slot_host_usage;
    DELETE FROM slot_owner_usage;
    INSERT INTO slot_host_usage (provisioner, host, slots)
    SELECT provisioner, host, sum(slots) FROM slot_reservations GROUP BY provisioner, host;
    INSERT INTO slot_owner_usage (provisioner, owner, host, resources)
    SELECT provisioner, owner, host, count(*) FROM slot_reservations GROUP BY provisioner, owner, host;
$$;

-- After the trigger exists (creating it waits for writers of slot_reservations to commit), so
-- every reservation is counted once: before, by this, or after, by the trigger.
SELECT berth_rebuild_slot_usage();
