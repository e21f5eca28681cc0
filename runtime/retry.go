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

// RetryPolicy is how a failing message is retried: the engine's
// (Options.Retry, whose zero fields take the defaults) and, per handler,
// Registration.Retry, whose zero fields keep the engine's.
type RetryPolicy struct {
	// MaxRetries is how many times a failing message is retried before
	// its partition halts; negative: none. Default 3.
	MaxRetries int
	// RetryBackoff is the first retry delay, doubled per retry up to
	// MaxBackoff. Default 100ms.
	RetryBackoff time.Duration
	// MaxBackoff caps the retry delay. Default 5s.
	MaxBackoff time.Duration
	// HaltedRetryInterval is how often the head of a halted partition is
	// retried, one attempt at a time, unless its failure is permanent
	// (Permanent, or an entry that cannot be decoded): a success resumes
	// the partition by itself, so an outage never leaves permanent
	// halts. Negative: never (the head waits for an operator). Default
	// 1m.
	HaltedRetryInterval time.Duration
}
