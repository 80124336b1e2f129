-- 0021: slot_host_usage and slot_owner_usage are kept in step with slot_reservations once per
-- statement, not once per row. The agent writes a group's reservations in one statement;
-- a trigger per row made two upserts per reservation, most of the cost of writing it. Now
-- each statement adds up its changes by host and by owner and host (from its transition
-- tables) and applies each sum once, in key order. Every writer's INSERT, UPDATE and DELETE
-- is still counted, as before; usage rows that fall to zero are still removed.

DROP TRIGGER slot_reservations_usage ON slot_reservations;
DROP FUNCTION berth_slot_reservations_usage();

-- Applies changes of slot_reservations: reservation i of provisioner p[i], owner o[i] and host
-- h[i] changed by d_slots[i] slots and d_resources[i] reservations. Each sum is applied once,
-- in key order, so that two writers wait for each other instead of deadlocking.
CREATE FUNCTION berth_slot_usage_apply(p text[], o text[], h text[], d_slots bigint[], d_resources bigint[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO slot_host_usage AS u (provisioner, host, slots)
    SELECT d.p, d.h, sum(d.s) FROM unnest(p, h, d_slots) AS d(p, h, s)
     GROUP BY d.p, d.h HAVING sum(d.s) <> 0
     ORDER BY d.p, d.h
    ON CONFLICT (provisioner, host) DO UPDATE SET slots = u.slots + EXCLUDED.slots;
    INSERT INTO slot_owner_usage AS u (provisioner, owner, host, resources)
    SELECT d.p, d.o, d.h, sum(d.r) FROM unnest(p, o, h, d_resources) AS d(p, o, h, r)
     GROUP BY d.p, d.o, d.h HAVING sum(d.r) <> 0
     ORDER BY d.p, d.o, d.h
    ON CONFLICT (provisioner, owner, host) DO UPDATE SET resources = u.resources + EXCLUDED.resources;
    DELETE FROM slot_host_usage u USING unnest(p, h) AS d(p, h)
     WHERE u.provisioner = d.p AND u.host = d.h AND u.slots = 0;
    DELETE FROM slot_owner_usage u USING unnest(p, o, h) AS d(p, o, h)
     WHERE u.provisioner = d.p AND u.owner = d.o AND u.host = d.h AND u.resources = 0;
$$;

-- Applies the changes of one statement on slot_reservations, whose rows before and after
-- are the transition tables old_rows (UPDATE, DELETE) and new_rows (INSERT, UPDATE). An
-- UPDATE that keeps a reservation's provisioner, owner and host changes only its host's
-- slots: its old row's -1 and new row's +1 reservations cancel out.
CREATE FUNCTION berth_slot_reservations_usage() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    p text[];
    o text[];
    h text[];
    d_slots bigint[];
    d_resources bigint[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(provisioner), array_agg(owner), array_agg(host), array_agg(slots::bigint), array_agg(1::bigint)
          INTO p, o, h, d_slots, d_resources FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(provisioner), array_agg(owner), array_agg(host), array_agg(-slots::bigint), array_agg(-1::bigint)
          INTO p, o, h, d_slots, d_resources FROM old_rows;
    ELSE
        SELECT array_agg(c.provisioner), array_agg(c.owner), array_agg(c.host), array_agg(c.slots), array_agg(c.resources)
          INTO p, o, h, d_slots, d_resources
          FROM (SELECT provisioner, owner, host, slots::bigint AS slots, 1::bigint AS resources FROM new_rows
                UNION ALL
                SELECT provisioner, owner, host, -slots::bigint, -1::bigint FROM old_rows) AS c;
    END IF;
    IF p IS NOT NULL THEN
        PERFORM berth_slot_usage_apply(p, o, h, d_slots, d_resources);
    END IF;
    RETURN NULL;
END
$$;

-- A trigger with transition tables serves one event.
CREATE TRIGGER slot_reservations_usage_insert
    AFTER INSERT ON slot_reservations REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION berth_slot_reservations_usage();
CREATE TRIGGER slot_reservations_usage_update
    AFTER UPDATE ON slot_reservations REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION berth_slot_reservations_usage();
CREATE TRIGGER slot_reservations_usage_delete
    AFTER DELETE ON slot_reservations REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION berth_slot_reservations_usage();

-- berth_slot_usage_add was the row trigger's; nothing else calls it.
DROP FUNCTION berth_slot_usage_add(text, text, text, bigint, bigint);

-- Writers that committed while the triggers were replaced are counted again from scratch.
SELECT berth_rebuild_slot_usage();
