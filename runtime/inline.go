package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// InlineBroker runs handlers in process, one message at a time in
// submission order. Keyed handlers are accepted (it advertises
// StreamPartitioning: with one goroutine and submission order, sequential
// by key holds trivially), so it is how handlers are unit-tested. Each
// message is encoded and decoded with the codec, as on the wire.
type InlineBroker struct {
	*Registry
	codec Codec

	mu       sync.Mutex
	queue    []Message
	draining bool
	states   map[string]any // pm name + "\x00" + correlation -> state
}

// NewInlineBroker returns an empty inline broker. It encodes with the
// given codec, or JSON when none (or nil) is given.
func NewInlineBroker(codecs ...Codec) *InlineBroker {
	codec := JSON
	if len(codecs) > 0 && codecs[0] != nil {
		codec = codecs[0]
	}
	return &InlineBroker{Registry: NewRegistry("inline", StreamPartitioning), codec: codec, states: map[string]any{}}
}

// Name is "inline".
func (b *InlineBroker) Name() string { return "inline" }

// Capabilities advertises StreamPartitioning.
func (b *InlineBroker) Capabilities() Capabilities { return StreamPartitioning }

// Register validates and adds handlers (see Registry.Add).
func (b *InlineBroker) Register(regs ...Registration) error { return b.Registry.Add(regs...) }

// Publish checks msg's key like the Redis publisher, then delivers it to
// every matching route, in order, after any message queued before it. A
// handler that publishes gets its message queued behind the current one,
// never run inside it. Publish returns the handler errors of the messages
// it delivered (joined); the inline broker does not retry. A backfill
// option is accepted and ignored: there is one lane, submission order.
func (b *InlineBroker) Publish(ctx context.Context, msg Message, _ ...PublishOption) error {
	if msg == nil {
		return fmt.Errorf("inline publish: nil message: %w", ErrPublish)
	}
	if _, _, err := partitionKey(msg, DefaultBackfillSuffix); err != nil {
		return fmt.Errorf("inline publish %s: %w", TypeName(msg), err)
	}
	b.mu.Lock()
	b.queue = append(b.queue, msg)
	if b.draining {
		b.mu.Unlock()
		return nil
	}
	b.draining = true
	b.mu.Unlock()

	var errs []error
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.draining = false
			b.mu.Unlock()
			return errors.Join(errs...)
		}
		m := b.queue[0]
		b.queue = b.queue[1:]
		b.mu.Unlock()
		if err := b.deliver(ctx, m); err != nil {
			errs = append(errs, err)
		}
	}
}

func (b *InlineBroker) deliver(ctx context.Context, msg Message) error {
	payload, err := b.codec.Marshal(msg)
	if err != nil {
		return fmt.Errorf("inline: encode %s: %w", TypeName(msg), err)
	}
	var errs []error
	for _, reg := range b.Registrations() {
		rt, ok := routeFor(reg, msg.StreamCategory(), TypeName(msg))
		if !ok {
			continue
		}
		if err := b.invoke(ctx, reg, rt, payload); err != nil {
			errs = append(errs, fmt.Errorf("handler %s on %s: %w", reg.Name, TypeName(msg), err))
		}
	}
	return errors.Join(errs...)
}

func (b *InlineBroker) invoke(ctx context.Context, reg Registration, rt Route, payload []byte) error {
	m, err := rt.Decode(b.codec, payload)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	var state any
	if reg.Kind == ProcessManager {
		if rt.Correlate == nil || reg.NewState == nil {
			return fmt.Errorf("pm route %s/%s lacks Correlate or NewState", rt.Category, rt.Type)
		}
		corr, err := rt.Correlate(m)
		if err != nil {
			return err
		}
		ctx = WithCorrelation(ctx, corr)
		id := reg.Name + "\x00" + corr
		b.mu.Lock()
		state = b.states[id]
		if state == nil {
			state = reg.NewState()
			b.states[id] = state
		}
		b.mu.Unlock()
	}
	return safeInvoke(ctx, rt, state, m)
}

// ErrHandlerPanic matches a handler panic, recovered and treated as a
// handler failure.
var ErrHandlerPanic = errors.New("handler panicked")

// safeInvoke calls the handler, turning a panic into an error: nothing a
// message contains may crash an instance.
func safeInvoke(ctx context.Context, rt Route, state any, m Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, p)
		}
	}()
	return rt.Invoke(ctx, state, m)
}
