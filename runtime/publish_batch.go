package runtime

import (
	"context"
	"fmt"

	"github.com/seqby/seqby/runtime/internal/publish"
)

// BatchError reports a PublishBatch that stored only part of its
// messages. Published[i] tells whether msgs[i] was stored. For the
// messages of one partition (one stream) the stored ones come first, in
// order: publishing the others again, in order, keeps the partition's
// order.
type BatchError struct {
	Published []bool // Published[i]: msgs[i] was stored
	Err       error  // why the rest was not (wraps ErrPublish)
}

// Error says how many messages were stored, so a log line tells a partial
// batch from a failed one.
func (e *BatchError) Error() string {
	n := 0
	for _, ok := range e.Published {
		if ok {
			n++
		}
	}
	return fmt.Sprintf("publish batch: %d of %d messages stored: %v", n, len(e.Published), e.Err)
}

// Unwrap returns Err, so errors.Is(err, ErrPublish) and checks for the
// Redis error hold for a partial batch as for a failed publish.
func (e *BatchError) Unwrap() error { return e.Err }

// PublishBatch publishes msgs in a few round trips: one MULTI/EXEC on a
// single Redis, then one pipeline for the wake-up signals; on a cluster
// one pipeline for the indexes, one per message of the longest partition
// in the batch, one that indexes again and reads whom to wake, and one
// for the wake-up signals (each to its partition's owners, or to every
// instance: see Publish). It is for outbox relays and bulk producers.
//
// Every message is checked and encoded first: a bad key (or any message
// Publish would refuse) fails the call, naming the message's index,
// before anything is written. The messages of one partition are appended
// in slice order, each with the guarantees of Publish. opts apply to every
// message; only AsBackfill is accepted (WithMessageID names one message,
// and WaitForReplicas one append: use Publish for those). A failure after
// some messages were stored is a *BatchError (errors.Is ErrPublish)
// telling which.
func (p *Publisher) PublishBatch(ctx context.Context, msgs []Message, opts ...PublishOption) error {
	var cfg publishConfig
	for _, o := range opts {
		o(&cfg)
	}
	ms := make([]publish.Message, len(msgs))
	for i, m := range msgs {
		ms[i] = m
	}
	stored, err := p.p.PublishBatch(ctx, ms, cfg)
	if stored != nil {
		return &BatchError{Published: stored, Err: err}
	}
	return err
}
