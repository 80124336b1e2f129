// Package kubernetes is the environ of a Kubernetes cluster: it runs each runtime resource as
// a dedicated Deployment (with a Service, a data volume and HTTP and gRPC Ingresses) and each
// ClickHouse resource as a single-replica StatefulSet (with a Service, a data volume and a
// Secret holding its password), all in the namespace of the provisioner's spec.
//
// # Resource types
//
// Each resource type the environ serves is one entry of a table (resourceType, in
// resourcetype.go; the built-in entries in runtime.go and clickhouse.go), as kinds.go is for
// the kinds of objects: the templates it renders, the prefix of its objects' names, how its
// args become what the templates see (image, slots, names of its own), the kind of its
// workload (whose rollout is its readiness, and which Hibernate scales to zero), whether it
// hibernates and counts against the slot quota, the objects it keeps outside its templates
// (ClickHouse's Secret) and the config it reports. Sizing is the same for every type: the
// spec's per-slot CPU, memory and storage times the slots. The rest of the environ looks a
// type up in the table and never asks for its name; a type not in it is refused for good,
// with an error naming the type and the served ones.
//
// The table holds the built-in types and those the provisioner's spec defines under
// "types" (TypeSpec, definedtype.go; docs/types.md). The built-in types are definitions of
// the same form embedded in Berth (types/runtime/type.json, types/clickhouse/type.json:
// their prefix, templates, hibernation, and ClickHouse's generated password Secret and
// config), with Go for what data does not say: their args are read by the TypeDefs the
// registry knows, runtimes are sized by slots against slot_quota and report numbers, and
// their images come from the spec. A spec's type is all data — template files, a JSON
// Schema of its args (compiled by github.com/santhosh-tekuri/jsonschema; its errors name
// args.<field>), an optional HTTP readiness probe set on the workload's container, config
// templates that see args and object names but no Secret's data, whether it hibernates and
// a units template. New compiles each definition and test-renders its templates with its
// example args, so a bad one fails when the configuration is loaded, naming the field. A
// defined type runs as the one Deployment or StatefulSet its templates render, and is
// reconciled, judged, hibernated, repaired and deleted by the same code as the built-in
// types. The environ reports their definitions (environ.TypeDefiner), which the registry
// adds to the set's catalog.
//
// # Objects and names
//
// Objects are rendered from Go templates producing YAML (see templates/README.md for the
// variables a template sees). The built-in templates are embedded; template_paths replaces
// any of them with a file. New parses every template and renders it for a sample resource,
// so a broken template is an error naming its template_paths key when the configuration is
// loaded. New never contacts the cluster: the client is built on first use.
//
// The client limits its own rate (qps, burst). A spec's budget is a rate every agent's
// instance of the provisioner shares: the client's transport makes every request wait for a
// token of it (budget.go, environ/internal/budget), which agents draw from one bucket in
// their database (environ.Deps.Budgets). It is the innermost wrapper of the transport:
// any other (a breaker, say) sits around it, so a request that one refuses spends no token.
//
// A resource's provision id is its id without dashes; its objects are named rt-<provision id>
// (runtimes) or ch-<provision id> (ClickHouse), with suffixes the templates choose, and its
// host is the spec's host with '*' replaced by the provision id.
//
// Every object carries the labels
//
//	app.kubernetes.io/managed-by=berth
//	berth.dev/provisioner=<provisioner name>
//	berth.dev/resource-id=<resource id>
//	berth.dev/resource-type=<runtime|clickhouse>
//
// (set by the environ, whatever the templates say, and on pod templates too) and the
// annotation berth.dev/template-checksum, the sha256 of the resource's rendered manifests.
// Deprovisioning and the orphan sweep find objects by these labels only: an object without
// them is never touched.
//
// Each of the resource's own labels (domain.Resource.Labels, a plain key) is on every object
// too, the ClickHouse Secret included, as label.berth.dev/<key>=<value>; not on pod
// templates. They are left out of the checksum, so a changed set relabels the objects (those
// no longer in it are removed: server-side apply drops what the field manager stopped
// setting, and the Secret, which is created rather than applied, is patched) without rolling
// the pods. A label Kubernetes refuses (a row written with SQL) fails the resource for good,
// naming the field.
//
// # Apply, drift and repair
//
// Reconcile renders the objects and server-side applies them (field manager "berth", forced)
// in order: volumes and services, then the workload, then ingresses. It skips the apply when
// every object exists with the current checksum and no drift, so re-applying an unchanged
// resource sends nothing. Drift is a missing object, a checksum that differs (the args,
// spec or templates changed), or fields Berth sets edited out of band (a workload's
// replicas, images or resources, a Service's selector or ports). The checksum is also on
// the pod template, so any change of the manifests rolls the pods. CheckResource puts drift
// right the same way and records each re-applied object in Resource.Repairs; otherwise it
// reports whether the workload is available.
//
// Volumes only grow: a claim that would shrink keeps its live size and Resource.Notice says
// so. A claim not yet bound (its pod not scheduled) cannot be resized at all, so it keeps its
// size too, with a notice, and grows on the first reconcile or health check after binding.
//
// A ClickHouse password is generated once (crypto/rand), kept in a Secret that is created,
// never applied, and read back on later reconciles; it is nowhere else: not in Config, State,
// errors or logs. Config holds the DSN without a password and the Secret's namespace, name
// and key, which clients read with credentials of their own.
//
// # Hibernation
//
// Hibernate (environ.Hibernator) applies the resource's objects with its workload at zero
// replicas and waits, for at most timeout_seconds, until its pods are gone. The volume claim
// (and its data), the Service, the Ingresses and the ClickHouse Secret are kept as they are,
// and so is every checksum: zero replicas is set after the checksum, so the pod template does
// not change. The state it returns is marked hibernated; a resource without a workload (never
// provisioned) has nothing applied, only its state marked. Waking is Reconcile, which always
// renders the resource running: the workload gets its replicas back and its pods mount the
// same claim. A hibernated runtime's Deployment holds none of the slot quota, and pods it no
// longer has request no CPU. CheckResource of a hibernated resource (its state says so)
// repairs drift towards zero replicas, never scaling it up, and does not ask for the
// workload to be available; the health checker does not check hibernated resources, Check
// does (see Fencing).
// Before it repairs anything a check reads the row again: one that moved on (another
// generation, deleting, paused, asked to hibernate or wake) gets nothing repaired, and the
// error wraps domain.ErrStale so that the check records nothing.
//
// # Readiness, deletion and housekeeping
//
// AwaitReady watches the workload until its rollout is complete, for at most
// timeout_seconds, and on failure says why from the workload's conditions and its pods'
// scheduling and container states. Deployments and StatefulSets are judged by one test, on
// the status fields both report: the controller has observed the current generation, and
// the updated, total and available replica counts are all the replicas asked for (kubectl's
// rollout-complete test of a Deployment). AwaitReady, and Hibernate's wait for its
// scale-down, wait on one cache of the provisioner's workloads of each kind, fed by one
// list and one watch (an informer, started by the first wait, stopped by Close, holding only
// each workload's labels, generation, replicas and status): a wait that lists and watches
// its workload alone makes two requests per rollout, and the API server answers each such
// list by going through every workload of the namespace. The cache is used for a rollout
// that this environ's last Reconcile (or Hibernate) of the resource applied or found, at
// that workload generation or a later one, so that a cached status from before the apply
// is never taken for the rollout; a rollout awaited without one (after a restart) or before
// the cache's first list is watched alone, as before. Deprovision deletes every labelled
// object of the resource with foreground propagation (not found is success) and polls
// until they are gone. Check lists the provisioner's objects (which proves the API answers)
// and deletes those whose resource no longer exists.
//
// # Fencing
//
// The database fences the writes of an agent whose lease was taken over (see
// domain.ReconcileStore): its progress records, slot reservations and finalize are refused.
// The cluster's writes are fenced too: every object applied records the resource generation
// and the reconcile lease of the attempt (AnnotationGeneration, AnnotationLeaseToken,
// AnnotationLeaseHolder), and every apply, hibernating scale and Deprovision delete of an
// attempt is refused with a StaleWriteError, logged, when the live object carries a newer
// generation or lease token. Each apply and delete is conditional on the object's
// resourceVersion as read, so a write that lands between the read and the write makes the
// API server refuse it and the object is read and checked again. StaleWriteError wraps a
// *domain.LeaseHeldError naming the holder the object records: the provisioner ends the
// attempt as a lost lease (nothing more written, the lease not released). A health check
// holds no lease: it carries over the lease the objects record, and guards its generation
// as described above. Objects are named by the resource id, so a stale agent never creates a
// second set; objects re-created for a resource deleted meanwhile are orphans, which Check's
// sweep deletes.
//
// Check also watches hibernated workloads: Hibernate marks the workload it scales to zero
// (AnnotationHibernated, dropped by the apply that wakes it), and a marked workload found
// with replicas while its row is hibernated (and not paused) is scaled back to zero, on
// condition of its resourceVersion, with a warning naming who set its replicas (the field
// manager that owns them).
//
// With slot_quota set, runtimes share that many slots: Reconcile reserves a runtime's slots in
// the agents' database (domain.SlotStore, under the attempt's lease, written only while the
// quota has room for it against every committed reservation), so the quota holds across
// agents, and one beyond it waits for capacity (one larger than the whole quota never fits:
// a domain.NeverFitsError).
// Deprovision and Hibernate release the reservation, waking reserves it again, and Check
// releases those whose resource row is gone. Capacity then reports the reserved slots;
// otherwise it reports the allocatable CPU of the nodes runtimes can be scheduled on and the
// CPU requests of the provisioner's pods.
package kubernetes
