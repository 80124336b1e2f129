package backend

// The statements on agents that both dialects write alike.

// DeleteAgentSQL removes agent $1's row if it is still of session $2.
const DeleteAgentSQL = `DELETE FROM agents WHERE id = $1 AND session = $2`
