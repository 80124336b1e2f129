package backend

// The statements on resources that both dialects write alike.

// BumpProvisionerResourcesSQL moves provisioner $1's resources, but those being deleted, to a
// new generation, with their attempts reset: its spec changed, so each is provisioned again to
// the new one.
const BumpProvisionerResourcesSQL = `
	UPDATE resources
	   SET generation = generation + 1, attempts = 0, next_attempt_at = NULL, last_error = ''
	 WHERE provisioner = $1 AND status <> 'deleting'`

// RetryFailedSQL moves the failed resources of a provisioner seen for the first time ($1) to a
// new generation: they failed because no agent knew it, and now one does.
const RetryFailedSQL = `
	UPDATE resources
	   SET generation = generation + 1, attempts = 0, next_attempt_at = NULL, last_error = ''
	 WHERE provisioner = $1 AND status = 'error'`

// NeedsAttentionSQL is true for a resources row the agent has work on: one not paused that is
// pending, provisioning, deleting, in error (re-evaluated at start) or hibernating; or asked to
// hibernate and not hibernated yet; or asked to run and hibernated, or ahead of its observed
// generation. It is the predicate of resources_needing_attention_idx in both stores' migrations
// (0011), which a query must state for the index to serve it; both dialects write it alike, so
// it has this one home, and each store's tests check its migration states it word for word.
const NeedsAttentionSQL = `(NOT paused AND (status IN ('pending', 'provisioning', 'deleting', 'error', 'hibernating')
       OR (hibernate AND status <> 'hibernated')
       OR (NOT hibernate AND (status = 'hibernated' OR generation <> observed_generation))))`
