-- The spec each provisioner last ran with. When it changes, the resources the provisioner
-- holds are bumped to a new generation so the agent reconciles them onto the new spec.
CREATE TABLE provisioner_specs (
    provisioner text PRIMARY KEY,
    fingerprint text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
