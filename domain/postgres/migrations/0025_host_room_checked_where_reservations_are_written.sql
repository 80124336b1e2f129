-- 0025: a group of one-transaction provisions checks its hosts' room in the statement that
-- writes its reservations, not in the agent between two round trips.
--
-- The group picks its hosts before it takes the provisioner's lock, so that its rows'
-- updates are not made under the lock; once the lock is held it must still find room on
-- every host it picked, against every reservation committed meanwhile. The agent used to read
-- the hosts' usage under the lock, check it, and write the reservations in a round trip of
-- its own: the lock was held across a round trip to the agent, which every other group of
-- the provisioner, of every agent, waited for. The reservations' statement now checks each
-- host first (berth_host_has_room, which raises a check violation naming the host and what it
-- lacks) and the group commits in the same round trip; a host without room fails the
-- statement, and the transaction is rolled back whole as before.

CREATE FUNCTION berth_host_has_room(provisioner text, host text, used bigint, wanted bigint, capacity bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF used + wanted > capacity THEN
        RAISE EXCEPTION 'host % of provisioner % has % of its % slots reserved: no room for % more', host, provisioner, used, capacity, wanted
            USING ERRCODE = 'check_violation', CONSTRAINT = 'slot_host_room';
    END IF;
    RETURN true;
END
$$;
