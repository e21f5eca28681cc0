package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Stuck and process-killing handlers. One attempt runs under the handler's
// timeout (HandlerTimeout, or Registration.Timeout): past it, its context
// is cancelled and the attempt fails with ErrHandlerTimeout. A body that
// ignores its context cannot be stopped, so it is logged as stuck, again
// every timeout while it runs. A head read more than MaxDeliveries times
// (once per owner that read it: the message may be killing the processes
// that handle it) halts, permanently, without being run again.

// ErrHandlerTimeout is the failure of an attempt that outlived its
// handler's timeout.
var ErrHandlerTimeout = contract.ErrHandlerTimeout

// stuckGrace bounds how long past its timeout a body may take to return
// before it is reported as ignoring its context: the timeout itself, at
// most this.
const stuckGrace = 5 * time.Second

// timeoutOf is reg's attempt timeout (0: none).
func (e *Engine) timeoutOf(reg Registration) time.Duration {
	d := e.o.HandlerTimeout
	if reg.Timeout != 0 {
		d = reg.Timeout
	}
	return max(d, 0)
}

// attempt runs attempt n (from 1) of reg's body on en, of category, under
// its timeout, with its MessageInfo in ctx, its span and its duration
// measured (telemetry.Telemetry.StartAttempt).
func (e *Engine) attempt(ctx context.Context, reg Registration, category string, en rdb.Entry, n int, body func(context.Context) error) (err error) {
	ctx, end := e.telemetry.StartAttempt(withMessage(ctx, en, n), reg.Name, category, en, n)
	defer func() { end(err) }()
	d := e.timeoutOf(reg)
	if d == 0 {
		return body(ctx)
	}
	actx, cancel := context.WithTimeoutCause(ctx, d, ErrHandlerTimeout)
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
				e.log.Error("seqby: a handler attempt is still running past its timeout and ignores its context; it holds its partition until it returns",
					"handler", reg.Name, "stream", en.Stream, "entry", en.ID, "running_for", time.Since(start).Round(time.Millisecond), "timeout", d)
				t.Reset(d)
			}
		}
	}()
	err = body(actx)
	// A body that returned nil succeeded, however late: its effect is
	// done, and running it again would only repeat it.
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), ErrHandlerTimeout) {
		err = fmt.Errorf("%w after %v: %w", ErrHandlerTimeout, d, err)
	}
	return err
}

// overDelivered is the halt of a head read more than MaxDeliveries times,
// or nil.
func (e *Engine) overDelivered(reg Registration, category string, en rdb.Entry) *Halt {
	if e.o.MaxDeliveries <= 0 || en.Deliveries <= int64(e.o.MaxDeliveries) {
		return nil
	}
	h := e.haltOf(reg, category, en, "delivered too many times",
		fmt.Errorf("the entry was delivered %d times (MaxDeliveries %d): the processes that handled it may have died on it; inspect it (seqbyctl inspect) before skipping it or moving it to the dead-letter stream",
			en.Deliveries, e.o.MaxDeliveries))
	h.Permanent = true
	return h
}
