package backend

// NeedsAttentionSQL is true for a resources row the agent has work on: pending,
// provisioning, deleting, error (re-evaluated at start), or ahead of its observed
// generation. It is the predicate of resources_needing_attention_idx in both stores'
// migrations, which a query must state for the index to serve it; both dialects write it
// alike, so it has this one home.
const NeedsAttentionSQL = `(status IN ('pending', 'provisioning', 'deleting', 'error') OR generation <> observed_generation)`
