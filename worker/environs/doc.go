// Package environs builds the agent's provisioner set (the named environs) and holds it for
// the workers that provision through it, which read it with the agent's clock and store
// through InputNames (inputs.go). When the worker stops, every environ is closed.
//
// # A new set
//
// The set to build comes from a SetSource, declared here and output as one by the
// provisioner-set manifold, so that neither worker imports the other. When the source
// accepts a new set, the worker closes its environs and returns dependency.ErrBounce: the
// engine starts it again at once with the new set, and bounces only the workers that depend
// on it (provisioner, healthcheck, capacity); the database and the others stay up.
//
// # Spec fingerprints
//
// Each time it starts, the worker records every provisioner's fingerprint
// (environ.Set.Fingerprint) with the store. A provisioner whose fingerprint differs from the
// one recorded before (its spec changed, while the agent ran or while it was down) has every
// resource moved to a new generation, so the provisioner worker reconciles them onto the new
// spec; the worker logs how many.
//
// The fingerprint is a sha256 of the provisioner's type and canonical spec JSON (keys sorted,
// no insignificant space, numbers as written), or of what the environ reports as an
// environ.ResourceSpecReporter: the static environ leaves out health probing, so a changed
// health_path reconciles nothing. Its format is stored state: changing it reconciles every
// resource once, on the first start after the upgrade. Recording happens after the worker has
// started, so its dependents may start a reconcile at the old generation first; the store then
// refuses that attempt's progress as stale and the provisioner reconciles the new generation.
//
// # Provisioners removed from the set
//
// After recording the fingerprints, the worker has the store mark every other provisioner
// with a recorded spec as absent, and logs those it newly marked. Their resources are kept:
// nothing is deprovisioned, and a ready one stays ready, since marking bumps nothing. A
// reconcile of one of them meanwhile (a new resource naming the provisioner, an args change)
// fails it permanently, as the provisioner worker cannot find the provisioner. An absent
// provisioner's recorded fingerprint matches no spec, so putting it back, with the same spec
// or another, moves all its resources to a new generation: the failed ones are retried and
// the others get one idempotent reconcile, without anyone editing their args.
//
// Agents that share a database with different sets take turns: an agent without the
// provisioner marks it absent when it starts, and the next start of an agent with it then
// reconciles its resources once more. Each such pair of starts costs one idempotent
// reconcile per resource, never a deprovision.
//
// Building the set for real can only fail where the provisioner-set worker's check of the same
// set passed for reasons outside the spec (a template file removed in between): the worker
// then fails, and the engine retries it with backoff.
package environs
