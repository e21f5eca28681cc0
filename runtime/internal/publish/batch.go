package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// PublishBatch checks and encodes every message, then publishes them all
// in a few round trips (rdb.PublishBatch): runtime.Publisher.PublishBatch
// once the options are applied. A refusal before anything was written
// comes with stored nil; a failed write comes with stored non-nil, one
// flag per message telling whether it was stored, and an error wrapping
// ErrPublish, which runtime reports as a *BatchError.
func (p *Publisher) PublishBatch(ctx context.Context, msgs []Message, call Call) (stored []bool, err error) {
	if call.IDSet || call.Replicas > 0 {
		return nil, fmt.Errorf("publish batch: WithMessageID and WaitForReplicas apply to one message; publish it with Publish: %w", ErrPublish)
	}
	if p.cfg.ReplicaAcks > 0 {
		return nil, fmt.Errorf("publish batch: PublisherOptions.ReplicaAcks is set and a batch does not wait for replicas; publish each message with Publish (or PublishRecord): %w", ErrPublish)
	}
	entries := make([]rdb.BatchEntry, len(msgs))
	for i, m := range msgs {
		it, err := p.Prepare(ctx, m, call)
		if err != nil {
			return nil, fmt.Errorf("publish batch: message %d: %w", i, err)
		}
		stream := it.Stream
		if !it.Partitioned {
			stream = it.Category
		}
		entries[i] = rdb.BatchEntry{Category: it.Category, Key: it.Key, Stream: stream, ID: it.ID, Partitioned: it.Partitioned, Fields: it.Fields}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	// Each message's generated id makes the batch idempotent, so a batch
	// whose reply was lost goes again (see write): what the first run
	// stored is not stored twice, and the rest follows it in order.
	window := p.window(false)
	send := func() (err error) {
		stored, err = rdb.PublishBatch(ctx, p.c, entries, p.cfg.SignalMaxLen, window)
		return err
	}
	if window > 0 {
		err = rdb.Resend(ctx, send)
	} else {
		err = send()
	}
	if errors.Is(err, rdb.ErrUnsignalled) {
		p.cfg.Logger.Warn("seqby: published, but waking idle consumers failed; they find the entries at their next re-check", "err", err)
		return nil, nil
	}
	if err != nil {
		if stored == nil {
			// A failed write says which messages it stored, even none:
			// runtime tells a write failure by a non-nil stored.
			stored = make([]bool, len(entries))
		}
		return stored, fmt.Errorf("%w: %w", ErrPublish, err)
	}
	return nil, nil
}
