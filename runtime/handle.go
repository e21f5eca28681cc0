package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// outcome of handling one entry.
type outcome int

const (
	outDone outcome = iota // processed: ack it
	outHalt                // cannot be processed: leave it pending, halt
	outLost                // the lease was lost: do not ack, abandon
	outStop                // asked to stop between retries: leave it pending
	// outSkip: not for the handler (a type it has no method for, an entry
	// published before it first started, or deleted while pending): ack
	// it as outDone, without a handler call, counted apart.
	outSkip
	// outPause: an operator paused the partition or its handler before
	// an attempt started; keep the entry to run once resumed.
	outPause
)

// handle decodes one entry and runs the handler on it, retrying with
// backoff per the handler's retry policy (retry.go). hctx is the handler's
// context (cancelled when a lease is lost); stop interrupts a retry
// backoff; g admits each attempt (attempt.go: the fence rule); halted: the
// entry is a halted head, given one attempt.
// Nothing a message contains can crash the instance: panics are failures,
// bad payloads and unknown types halt.
func (e *Engine) handle(hctx context.Context, stop <-chan struct{}, g *gate, reg Registration, category string, en rdb.Entry, halted bool) (outcome, *Halt) {
	halt := func(reason string, err error) (outcome, *Halt) {
		h := e.haltOf(reg, category, en, reason, err)
		h.Permanent = errors.Is(err, ErrPermanent)
		return outHalt, h
	}
	rt, m, skip, h := e.decodeEntry(reg, category, en)
	switch {
	case h != nil:
		return outHalt, h
	case skip:
		return outSkip, nil
	}
	var err error
	corr := ""
	if reg.Kind == ProcessManager { // a pm that is not sequential (pm.go has the others)
		if corr, err = safeCorrelate(rt, m); err != nil {
			return halt("no correlation value", Permanent(err))
		}
		hctx = WithCorrelation(hctx, corr)
	}
	policy := e.retryOf(reg)
	if halted {
		policy.MaxRetries = 0
	}
	backoff := policy.RetryBackoff
	for attempt := 0; ; attempt++ {
		if !g.enter(hctx) {
			if g.paused {
				return outPause, nil
			}
			if g.stopped {
				return outStop, nil
			}
			return outLost, nil
		}
		err = e.attempt(hctx, reg, category, en, attempt+1, func(ctx context.Context) error {
			if reg.Kind == ProcessManager {
				return e.applyPMOptimistic(ctx, reg, rt, corr, m)
			}
			return safeInvoke(ctx, rt, nil, m)
		})
		g.leave(err == nil)
		if err == nil {
			return outDone, nil
		}
		if hctx.Err() != nil {
			return outLost, nil
		}
		if errors.Is(err, ErrPermanent) {
			return halt("handler failed permanently", err)
		}
		if attempt >= policy.MaxRetries {
			return halt(fmt.Sprintf("handler failed %d times", attempt+1), err)
		}
		e.telemetry.Event(hctx, reg.Name, category, telemetry.OutcomeRetried)
		e.log.Warn("seqby: handler failed; retrying", "handler", reg.Name, "stream", en.Stream,
			"entry", en.ID, "attempt", attempt+1, "backoff", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-hctx.Done():
			t.Stop()
			return outLost, nil
		case <-stop:
			t.Stop()
			return outStop, nil
		}
		backoff = min(2*backoff, policy.MaxBackoff)
	}
}

// haltOf describes an entry that cannot be processed.
func (e *Engine) haltOf(reg Registration, category string, en rdb.Entry, reason string, err error) *Halt {
	return &Halt{Handler: reg.Name, Category: category, Stream: en.Stream, EntryID: en.ID,
		MessageType: en.Fields[rdb.FieldType], MessageID: en.Fields[rdb.FieldID], Reason: reason, Err: err,
		Owner: e.o.OwnerID, At: time.Now()}
}

// decodeEntry finds the entry's route and decodes its payload. skip: the
// entry was deleted while pending, or it is another handler's message
// type; ack it and move on. A non-nil Halt: the entry cannot be processed
// (a type this build does not know, or an undecodable payload), or it is
// not this build's to run: its type is not routed here but another live
// build of the handler routes it (deploy.go; not permanent).
func (e *Engine) decodeEntry(reg Registration, category string, en rdb.Entry) (rt Route, m any, skip bool, h *Halt) {
	if en.Fields == nil {
		e.log.Warn("seqby: pending entry was deleted from the stream; acking it", "stream", en.Stream, "entry", en.ID, "handler", reg.Name)
		return rt, nil, true, nil
	}
	if e.beforeStart(reg, category, en.ID) {
		return rt, nil, true, nil // published before this handler first started
	}
	typ := en.Fields[rdb.FieldType]
	rt, ok := routeFor(reg, category, typ)
	if !ok {
		if h := e.leftForAnotherBuild(reg, category, en, typ); h != nil {
			return rt, nil, false, h
		}
	}
	if !ok && e.reg.KnownType(category, typ) {
		return rt, nil, true, nil // another handler's message type
	}
	if !ok {
		h := e.haltOf(reg, category, en, "unknown message type",
			fmt.Errorf("%s %s has no route for type %q on %s, and no registration lists it: deploy a build that knows it, or skip it with seqbyctl", reg.Kind, reg.Name, typ, category))
		h.Permanent = true
		return rt, nil, false, h
	}
	m, err := safeDecode(rt, e.o.Codec, []byte(en.Fields[rdb.FieldPayload]))
	if err != nil {
		h := e.haltOf(reg, category, en, "undecodable payload", err)
		h.Permanent = true
		return rt, nil, false, h
	}
	return rt, m, false, nil
}

// safeDecode runs generated Decode, turning a panic into an error.
func safeDecode(rt Route, c Codec, payload []byte) (m any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decode panicked: %v", p)
		}
	}()
	m, err = rt.Decode(c, payload)
	if err == nil && m == nil {
		err = fmt.Errorf("decode of %s returned no message", rt.Type)
	}
	return m, err
}
