package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// stuckGrace bounds how long past its timeout a body may take to return
// before it is reported as ignoring its context: the timeout itself, at
// most this.
const stuckGrace = 5 * time.Second

// Attempt runs attempt n (from 1) of the handler added as name on en, of
// category: body gets ctx with en's MessageInfo, under the handler's
// timeout, with its span and its duration measured. A name never added
// runs without a timeout (the InlineBroker's attempts).
func (x *Executor) Attempt(ctx context.Context, name, category string, en rdb.Entry, n int, body func(context.Context) error) error {
	h := x.handler(name)
	if h == nil {
		h = &handler{Handler: Handler{Name: name}}
	}
	return x.attempt(ctx, h, category, en, n, body)
}

// attempt is Attempt for h.
func (x *Executor) attempt(ctx context.Context, h *handler, category string, en rdb.Entry, n int, body func(context.Context) error) (err error) {
	ctx = withMessage(ctx, en, n)
	if t := x.cfg.Telemetry; t != nil {
		var end func(error)
		ctx, end = t.StartAttempt(ctx, h.Name, category, en, n)
		defer func() { end(err) }()
	}
	d := h.timeout
	if d == 0 {
		return body(ctx)
	}
	actx, cancel := context.WithTimeoutCause(ctx, d, contract.ErrHandlerTimeout)
	defer cancel()
	start := time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() { // ends with the attempt
		t := time.NewTimer(d + min(d, stuckGrace))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				x.log.Error("seqby: a handler attempt is still running past its timeout and ignores its context; it holds its partition until it returns",
					"handler", h.Name, "stream", en.Stream, "entry", en.ID, "running_for", time.Since(start).Round(time.Millisecond), "timeout", d)
				t.Reset(d)
			}
		}
	}()
	err = body(actx)
	// A body that returned nil succeeded, however late: its effect is
	// done, and running it again would only repeat it.
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), contract.ErrHandlerTimeout) {
		err = fmt.Errorf("%w after %v: %w", contract.ErrHandlerTimeout, d, err)
	}
	return err
}

// withMessage gives an attempt's context its MessageInfo: en's, with the
// generation of the lease ctx carries.
func withMessage(ctx context.Context, en rdb.Entry, attempt int) context.Context {
	mi := contract.MessageInfo{Stream: en.Stream, EntryID: en.ID, Attempt: attempt, Deliveries: en.Deliveries}
	if en.Fields != nil {
		mi.MessageID = en.Fields[rdb.FieldID]
		mi.PublishedAt, _ = time.Parse(time.RFC3339Nano, en.Fields[rdb.FieldPublishedAt])
		if r, ok := rdb.ParseReplayed(en.Fields); ok {
			mi.Replay = &contract.ReplayInfo{OriginalStream: r.Stream, OriginalEntryID: r.Of, DLQ: r.DLQ, DLQEntryID: r.DLQID, Handler: r.Handler}
		}
	}
	if li, ok := contract.LeaseFrom(ctx); ok {
		mi.Generation = li.Generation
	}
	return contract.WithMessage(ctx, mi)
}

// OverDelivered is the halt of a head read more than MaxDeliveries times,
// or nil.
func (x *Executor) OverDelivered(name, category string, en rdb.Entry) *contract.Halt {
	if x.cfg.MaxDeliveries <= 0 || en.Deliveries <= int64(x.cfg.MaxDeliveries) {
		return nil
	}
	h := x.Halt(name, category, en, "delivered too many times",
		fmt.Errorf("the entry was delivered %d times (MaxDeliveries %d): the processes that handled it may have died on it; inspect it (seqbyctl inspect) before skipping it or moving it to the dead-letter stream",
			en.Deliveries, x.cfg.MaxDeliveries))
	h.Permanent = true
	return h
}
