package runtime

import (
	"context"
	"fmt"
	"time"
)

// outcome of handling one entry.
type outcome int

const (
	outDone outcome = iota // processed (or skipped as deleted): ack it
	outHalt                // cannot be processed: leave it pending, halt
	outLost                // the lease was lost: do not ack, abandon
	outStop                // asked to stop between retries: leave it pending
)

// handle decodes one entry and runs the handler on it, retrying with
// backoff up to MaxRetries. hctx is the handler's context (cancelled when a
// lease is lost); stop interrupts a retry backoff. Nothing a message
// contains can crash the instance: panics are failures, bad payloads and
// unknown types halt.
func (e *Engine) handle(hctx context.Context, stop <-chan struct{}, reg Registration, category string, en Entry) (outcome, *Halt) {
	halt := func(reason string, err error) (outcome, *Halt) {
		return outHalt, &Halt{Handler: reg.Name, Category: category, Stream: en.Stream, EntryID: en.ID,
			MessageType: en.Fields[FieldType], MessageID: en.Fields[FieldID], Reason: reason, Err: err,
			Owner: e.o.OwnerID, At: time.Now()}
	}
	if en.Fields == nil {
		e.log.Warn("seqby: pending entry was deleted from the stream; acking it", "stream", en.Stream, "entry", en.ID, "handler", reg.Name)
		return outDone, nil
	}
	typ := en.Fields[FieldType]
	rt, ok := routeFor(reg, category, typ)
	if !ok && e.KnownType(category, typ) {
		return outDone, nil // another handler's message type: skip it
	}
	if !ok {
		return halt("unknown message type", fmt.Errorf("handler %s has no route for type %q on %s", reg.Name, typ, category))
	}
	m, err := safeDecode(rt, e.o.Codec, []byte(en.Fields[FieldPayload]))
	if err != nil {
		return halt("undecodable payload", err)
	}
	corr := ""
	if reg.Kind == ProcessManager { // a pm that is not sequential (pm.go has the others)
		if corr, err = safeCorrelate(rt, m); err != nil {
			return halt("no correlation value", err)
		}
		hctx = WithCorrelation(hctx, corr)
	}
	backoff := e.o.RetryBackoff
	for attempt := 0; ; attempt++ {
		select {
		case e.sem <- struct{}{}:
		case <-hctx.Done():
			return outLost, nil
		}
		if reg.Kind == ProcessManager {
			err = e.applyPMOptimistic(hctx, reg, rt, corr, m)
		} else {
			err = safeInvoke(hctx, rt, nil, m)
		}
		<-e.sem
		if err == nil {
			return outDone, nil
		}
		if hctx.Err() != nil {
			return outLost, nil
		}
		if attempt >= e.o.MaxRetries {
			return halt(fmt.Sprintf("handler failed %d times", attempt+1), err)
		}
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
		backoff = min(2*backoff, e.o.MaxBackoff)
	}
}

// safeDecode runs generated Decode, turning a panic into an error.
func safeDecode(rt Route, c Codec, payload []byte) (m Message, err error) {
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
