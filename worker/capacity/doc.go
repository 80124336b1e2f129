// Package capacity is the worker that samples every provisioner's capacity, records it over
// time and raises a warning when a provisioner runs short.
//
// Every Interval (and at start) it asks each environ that implements
// environ.CapacityReporter for its capacity, records one sample of the total (host "") and
// one per host, and evaluates three warnings per provisioner:
//
//   - "total": at least TotalThreshold (default 80%) of the usable capacity is used;
//   - "hosts": every usable host is at least HostThreshold (default 70%) full, so no host
//     has much room left even when the total does;
//   - "no-usable-hosts": no host is usable at all.
//
// A host is usable when it is up and has a capacity above zero; down and empty hosts count
// towards neither the used nor the total capacity, so a down host neither hides nor fakes
// a shortage. An environ that reports no hosts is treated as one host.
//
// A warning's state is kept in the database (capacity_warnings), and a warning is written,
// logged and announced only when it starts or clears, not on every sample. The state is
// read back when the worker starts, so a restart does not raise a warning again. The
// optional Observer sees every sample and the current state of every warning.
//
// The worker runs on the leader only, and its samples and warnings carry the leadership
// term it runs under (Config.Term): once another agent leads, the store refuses them, so a
// leader that resumed after a pause records nothing; the refusal is logged at debug.
package capacity
