package runtime

import (
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
)

// Transient versus poison. A failing head is retried with capped
// exponential backoff (RetryBackoff doubling up to MaxBackoff), MaxRetries
// times. Then the partition is reported halted (log, OnHalt, halt record),
// but unless the failure is permanent its head keeps being retried every
// HaltedRetryInterval, one attempt at a time, until it succeeds (the
// partition then resumes by itself and its halt record goes) or an
// operator skips it or moves it to the dead-letter stream. So an outage of
// something the handler needs halts partitions for the outage only, never
// for good. A permanent failure (Permanent, or an entry that cannot be
// decoded or routed) halts at once and waits for the operator.

// Permanent marks a handler error that no retry can fix (the message is
// invalid for the handler): the partition halts at once, without retries,
// and its head waits for an operator. errors.Is(err, ErrPermanent) and
// errors.Is against the wrapped error both hold. Permanent(nil) is nil.
//
// The error's text is err's own: being permanent is a class, not part of
// the message, and every report of a halt already says it (the reason
// "handler failed permanently", Halt.Permanent). A prefix would read
// "failed permanently: permanent: ..." there, and once more per layer
// that wraps an error already permanent; Permanent of such an error
// returns it unchanged.
func Permanent(err error) error { return contract.Permanent(err) }

// RetryPolicy overrides, for one handler (Registration.Retry), the
// engine's retry options of the same names. A zero field keeps the
// engine's value.
type RetryPolicy struct {
	// MaxRetries before the partition halts; negative: none.
	MaxRetries int
	// RetryBackoff is the first retry delay, doubled up to MaxBackoff.
	RetryBackoff time.Duration
	// MaxBackoff caps the retry delay.
	MaxBackoff time.Duration
	// HaltedRetryInterval is how often a halted head is retried; negative:
	// never (it waits for an operator).
	HaltedRetryInterval time.Duration
}
