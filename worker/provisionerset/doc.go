// Package provisionerset is the agent's source of its provisioner set: it holds the set the
// agent runs with and replaces it, while the agent runs, when the operator changes it.
//
// # Reloads
//
// A reload is asked for by a signal (berth run passes SIGHUP) or, when the set comes from a
// file (--provisioners FILE), by the file changing on disk. The worker watches the file's
// directory rather than the file, so an editor's or a deployment tool's write-to-temporary
// and rename over the file is seen as well as an in-place write. So is a file mounted from a
// Kubernetes ConfigMap, a symlink FILE -> ..data/FILE that an update changes by renaming a
// new ..data symlink (to a new timestamped directory) over the old one: after every event in
// the directory the worker resolves FILE's symlinks again, and a file that now resolves
// elsewhere has changed. Other events in the directory are ignored (other names, or the
// update's other steps, after which FILE resolves where it did). File events are debounced
// on the injected clock: a reload happens once the file has been quiet for Debounce, so one
// save is one reload, and an update that leaves the set's digest as it was (another key of
// the ConfigMap changed) is no reload (see below). A signal reloads at once. A set from the
// environment (BERTH_PROVISIONER_SET_JSON) cannot change while the agent runs; a signal then
// only logs that there is nothing to reload.
//
// # Accepting a set
//
// A reload reads the file and builds every provisioner of it exactly as berth check-config
// does (specs parsed and validated, templates loaded, no database), then closes what it
// built. Only a set that builds is published, so the environs worker, which builds the
// published set for real, is never handed one that cannot work:
//
//	read ──► build & check ──ok──► same digest as the running set? ──yes──► log "unchanged"
//	  │            │                         │
//	  │            └─error──┐                └─no──► publish: Current() returns the new JSON,
//	  └─error───────────────┴──► log one error line naming       and the channel it handed
//	                             the provisioner and field;      out before is closed
//	                             keep running the previous set
//
// The comparison is by environ.Set.Digest, not by bytes: a file rewritten with other spacing
// or key order is not a reload, while any change to a provisioner's spec, the provisioners
// named, or what an environ reports its resources are built from is.
//
// # Lifetime
//
// The worker's only input is the clock, and no reload failure stops it (a failure to watch
// the file is logged once and leaves reloading to the signal), so it runs as long as the
// agent and the set it last accepted is never lost to a restart. It starts from the set the
// agent checked at startup (an invalid set there is a startup error) and reads the file once
// more as soon as it watches it, so a change made between the agent's read and the watch is
// not missed.
package provisionerset
