-- 0027: the trigger that clears unhealthy_since runs only when there is something to clear.
--
-- berth_resources_unhealthy_since (0002) sets unhealthy_since to NULL whenever a resource's
-- status is not unhealthy. It ran on every update of every row, almost always to set a NULL
-- column to NULL: about 1 us a row of a 2,000-row update on an idle server, 2.5% of the
-- statement, and more under load. A WHEN condition is evaluated by the server without
-- calling the function, and for a BEFORE trigger on the row as the triggers before it left
-- it (they fire in name order), just as the function's own test was, so the column ends the
-- same for every write.

DROP TRIGGER resources_before_update_unhealthy ON resources;

-- Runs after resources_before_update (triggers fire in name order).
CREATE TRIGGER resources_before_update_unhealthy
    BEFORE UPDATE ON resources
    FOR EACH ROW
    WHEN (NEW.status <> 'unhealthy' AND NEW.unhealthy_since IS NOT NULL)
    EXECUTE FUNCTION berth_resources_unhealthy_since();
