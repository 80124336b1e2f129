package provisioner

import (
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// failureKind is what an attempt was doing and what went wrong, as far as the retry policy
// cares.
type failureKind int

const (
	// failedTransient is an error retrying may mend (a broker that did not answer, a
	// resource that did not come up in time): the attempt is retried with backoff.
	failedTransient failureKind = iota
	// failedDeprovision is any error of an attempt freeing a deleting resource.
	failedDeprovision
	// failedHibernate is any error of an attempt hibernating a resource.
	failedHibernate
	// failedUnreadable is a row with a column the agent cannot decode.
	failedUnreadable
	// failedUnknownType is a row whose type no environ of the agent serves.
	failedUnknownType
	// failedPermanent is an error the broker says retrying cannot mend.
	failedPermanent
	// failedNoCapacity is a broker with no room for the resource.
	failedNoCapacity
	// failedResizeNoCapacity is a broker with no room for the new size of a resource that
	// serves at its observed generation: it keeps serving while it waits.
	failedResizeNoCapacity
	// failedNeverFits is a request larger than anything the provisioner has
	// (*domain.NeverFitsError): no room that frees can hold it.
	failedNeverFits
	// failedOverQuota is an admission that would take the resource's owner past its quota
	// on the provisioner (*domain.QuotaExceededError).
	failedOverQuota
	// failedResizeOverQuota is failedOverQuota for the new size of a resource that serves
	// at its observed generation: it keeps serving while it waits.
	failedResizeOverQuota
	// failedBrokerUnavailable is an attempt that did not call its broker, or whose broker
	// failed, while the provisioner's breaker is open (*brokerWait).
	failedBrokerUnavailable
)

// failure is the outcome of a failed attempt, with what the retry policy needs of the row.
type failure struct {
	kind failureKind
	err  error
	// attempts are the row's failed attempts before this one.
	attempts int
	// status, reason and message are the row's as the attempt last read or wrote them.
	status  domain.Status
	reason  domain.Reason
	message string
	// generation and observed are the row's generation and observed generation.
	generation, observed int64
	// wait is the breaker's wait of a failedBrokerUnavailable.
	wait *brokerWait
	// hibernating says the attempt was hibernating the resource.
	hibernating bool
	// serving says the resource was ready at its observed generation when the attempt began.
	serving bool
}

// classify is the failure of attempt a with err. Freeing and hibernating a resource are
// retried whatever the error, so what the attempt was doing comes first.
func (a *attempt) classify(err error) failure {
	f := failure{err: err, attempts: a.r.Attempts, status: a.r.Status, reason: a.r.Reason, message: a.r.StatusMessage,
		generation: a.r.Generation, observed: a.r.ObservedGeneration, hibernating: a.hibernating, serving: a.serving}
	switch {
	case errors.As(err, &f.wait):
		f.kind = failedBrokerUnavailable
	case a.r.Status == domain.StatusDeleting:
		f.kind = failedDeprovision
	case a.hibernating:
		f.kind = failedHibernate
	case errors.As(err, new(*unreadableError)):
		f.kind = failedUnreadable
	case errors.As(err, new(*environ.UnknownTypeError)):
		f.kind = failedUnknownType
	case errors.As(err, new(*domain.NeverFitsError)):
		f.kind = failedNeverFits
	case errors.As(err, new(*domain.QuotaExceededError)) && a.serving:
		f.kind = failedResizeOverQuota
	case errors.As(err, new(*domain.QuotaExceededError)):
		f.kind = failedOverQuota
	case environ.IsPermanent(err):
		f.kind = failedPermanent
	case errors.Is(err, domain.ErrNoCapacity) && a.serving:
		f.kind = failedResizeNoCapacity
	case errors.Is(err, domain.ErrNoCapacity):
		f.kind = failedNoCapacity
	}
	return f
}

// retryPolicy holds the settings that decide when a failed attempt is retried.
type retryPolicy struct {
	base, max     time.Duration // bounds of the exponential backoff (see backoff)
	capacityRetry time.Duration // longest wait between retries of a resource waiting for capacity
	rand          func() float64
}

// retryDecision is what the record of a failed attempt says.
type retryDecision struct {
	status   domain.Status
	reason   domain.Reason
	message  string
	attempts int
	retryIn  time.Duration // 0: not retried until the row changes
	outcome  string        // Outcome*, for Metrics
	// stillWaiting says the resource waited for capacity already, for the same reason: the
	// row keeps its status, reason and message, so the retry adds nothing to its history.
	stillWaiting bool
}

// decide is the retry policy: the next status, reason, message, retry delay and metric
// outcome of failure f, at now (the time the messages name for the retry).
//
//	deprovision   deleting/Backoff            backoff            retry
//	hibernate     hibernating/Backoff         backoff            retry
//	unreadable    error/UnreadableRow         backoff            retry
//	unknown type  error/UnknownType           none               permanent
//	permanent     error/BrokerError           none               permanent
//	never fits    error/NeverFits             none               permanent
//	no capacity   pending/WaitingForCapacity  min(backoff, cap)  capacity
//	resize, no    ready/ResizeWaitingFor-     min(backoff, cap)  capacity
//	capacity      Capacity
//	over quota    pending/QuotaExceeded       min(backoff, cap)  capacity
//	resize, over  ready/QuotaExceeded         min(backoff, cap)  capacity
//	quota
//	transient     provisioning/Backoff        backoff            retry
//	breaker open  (status kept)/Broker-       next probe         broker-unavailable
//	              Unavailable
//
// Deprovisioning is retried whatever the error: giving up would leak what the resource
// holds. Hibernating keeps the resource's data: it is retried whatever the error, the
// resource staying hibernating meanwhile. Nothing can be provisioned from an unreadable row
// until someone fixes it; retrying with backoff notices the fix without a change event (a
// plain-SQL fix of state or config writes none).
//
// A request that never fits is not a wait: no room that frees can hold it. Its message is
// the NeverFitsError's own, naming the largest size the provisioner has. A change of the
// provisioner's spec moves its resources to a new generation with their failures cleared
// (the environs worker's ApplyProvisionerSpec), so raising a host's slots or the quota
// retries it without anyone touching the row. A resize of a resource that was ready when
// the attempt began, with too little room free, leaves it serving: the broker changed
// nothing, so it goes back to ready at its observed generation, and the resize waits like a
// capacity wait.
//
// A quota is a wait too, not an error: the admission is asked before the broker, so a
// create waits pending and a resize of a ready resource waits serving its old size, both
// with reason QuotaExceeded, retried like a capacity wait and woken when the quota changes
// or the agent frees room on the provisioner. The whole wait is one event of the
// resource's history: a retry that still finds the quota full keeps the row's message (its
// last_error says the usage now).
func (p retryPolicy) decide(f failure, now time.Time) retryDecision {
	d := retryDecision{attempts: f.attempts + 1, outcome: OutcomeRetry}
	retryAt := func(delay time.Duration) string {
		d.retryIn = delay
		return now.Add(delay).UTC().Format(time.RFC3339)
	}
	switch f.kind {
	case failedDeprovision:
		d.status, d.reason = domain.StatusDeleting, domain.ReasonBackoff
		d.message = fmt.Sprintf("deprovision attempt %d failed: %v; retrying at %s", d.attempts, f.err, retryAt(p.backoff(d.attempts)))
	case failedHibernate:
		d.status, d.reason = domain.StatusHibernating, domain.ReasonBackoff
		d.message = fmt.Sprintf("hibernate attempt %d failed: %v; retrying at %s", d.attempts, f.err, retryAt(p.backoff(d.attempts)))
	case failedUnreadable:
		d.status, d.reason = domain.StatusError, domain.ReasonUnreadableRow
		d.message = fmt.Sprintf("%v; looking again at %s", f.err, retryAt(p.backoff(d.attempts)))
	case failedUnknownType:
		d.status, d.reason, d.message, d.outcome = domain.StatusError, domain.ReasonUnknownType, f.err.Error(), OutcomePermanent
	case failedPermanent:
		d.status, d.reason, d.message, d.outcome = domain.StatusError, domain.ReasonBrokerError, f.err.Error(), OutcomePermanent
	case failedNeverFits:
		var nf *domain.NeverFitsError
		errors.As(f.err, &nf)
		d.status, d.reason, d.message, d.outcome = domain.StatusError, domain.ReasonNeverFits, nf.Error(), OutcomePermanent
	case failedNoCapacity:
		// The row's WaitingSince says since when: the message need not.
		d.status, d.reason, d.outcome = domain.StatusPending, domain.ReasonWaitingForCapacity, OutcomeCapacity
		d.retryIn = min(p.backoff(d.attempts), p.capacityRetry)
		d.message = fmt.Sprintf("waiting for capacity: %v", f.err)
		d.stillWaiting = f.status == domain.StatusPending && f.reason == domain.ReasonWaitingForCapacity && f.message == d.message
	case failedResizeNoCapacity:
		d.status, d.reason, d.outcome = domain.StatusReady, domain.ReasonResizeWaitingForCapacity, OutcomeCapacity
		d.retryIn = min(p.backoff(d.attempts), p.capacityRetry)
		d.message = fmt.Sprintf("serving generation %d while generation %d waits for capacity: %v", f.observed, f.generation, f.err)
		d.stillWaiting = f.status == domain.StatusReady && f.reason == domain.ReasonResizeWaitingForCapacity && f.message == d.message
	case failedOverQuota, failedResizeOverQuota:
		var qe *domain.QuotaExceededError
		errors.As(f.err, &qe)
		d.status, d.reason, d.outcome = domain.StatusPending, domain.ReasonQuotaExceeded, OutcomeCapacity
		d.message = fmt.Sprintf("waiting for quota: %v", qe)
		if f.kind == failedResizeOverQuota {
			d.status = domain.StatusReady
			d.message = fmt.Sprintf("waiting for quota: %v; serving generation %d meanwhile", qe, f.observed)
		}
		d.retryIn = min(p.backoff(d.attempts), p.capacityRetry)
		if d.stillWaiting = f.status == d.status && f.reason == d.reason; d.stillWaiting {
			d.message = f.message
		}
	case failedBrokerUnavailable:
		d = brokerUnavailable(f)
	default:
		d.status, d.reason = domain.StatusProvisioning, domain.ReasonBackoff
		d.message = fmt.Sprintf("attempt %d failed: %v; retrying at %s", d.attempts, f.err, retryAt(p.backoff(d.attempts)))
	}
	return d
}

// backoff is the jittered delay before the retry that follows failed attempt attempts.
func (p retryPolicy) backoff(attempts int) time.Duration {
	return backoff(p.base, p.max, attempts, p.rand())
}
