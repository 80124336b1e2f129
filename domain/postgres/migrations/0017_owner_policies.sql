-- 0017: the owners' policies, for fair queueing between owners. An owner with no row has
-- weight 1 and the default class.
--
--   * weight: the owner's share of the agents' work while several owners have work
--     waiting (an owner of weight 3 is served three resources for each one of weight 1);
--   * class: the label the owner's queued work is counted under in the agents' metrics
--     ('' is the default class), so that owners are never labels themselves;
--   * updated_at: the database clock at the last write.
--
-- Clients may read the table (see 0012 and berth migrate --client-role); the agent's role
-- writes it (berth owners set|unset).

CREATE TABLE owner_policies (
    owner      text PRIMARY KEY CHECK (owner <> ''),
    weight     integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    class      text NOT NULL DEFAULT '' CHECK (class ~ '^[a-z0-9-]{0,32}$'),
    updated_at timestamptz NOT NULL DEFAULT now()
);
