package runtime

import (
	"context"
	"encoding/json"
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
	reg   *Registry
	codec Codec

	mu       sync.Mutex
	queue    []Message
	draining bool
	states   *MemoryStateStore
}

// NewInlineBroker returns an empty inline broker. It encodes with the
// given codec, or JSON when none (or nil) is given.
func NewInlineBroker(codecs ...Codec) *InlineBroker {
	codec := JSON
	if len(codecs) > 0 && codecs[0] != nil {
		codec = codecs[0]
	}
	return &InlineBroker{reg: NewRegistry("inline", StreamPartitioning), codec: codec, states: NewMemoryStateStore()}
}

// Name is "inline".
func (b *InlineBroker) Name() string { return "inline" }

// Capabilities advertises StreamPartitioning.
func (b *InlineBroker) Capabilities() Capabilities { return StreamPartitioning }

// Register validates and adds handlers (see Registry.Add).
func (b *InlineBroker) Register(regs ...Registration) error { return b.reg.Add(regs...) }

// Registrations returns what was registered, in order.
func (b *InlineBroker) Registrations() []Registration { return b.reg.Registrations() }

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
		return fmt.Errorf("inline publish %s: %w", typeName(msg), err)
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
		return fmt.Errorf("inline: encode %s: %w", typeName(msg), err)
	}
	var errs []error
	for _, reg := range b.reg.Registrations() {
		rt, ok := routeFor(reg, msg.StreamCategory(), typeName(msg))
		if !ok {
			continue
		}
		if err := b.invoke(ctx, reg, rt, payload); err != nil {
			errs = append(errs, fmt.Errorf("handler %s on %s: %w", reg.Name, typeName(msg), err))
		}
	}
	return errors.Join(errs...)
}

func (b *InlineBroker) invoke(ctx context.Context, reg Registration, rt Route, payload []byte) error {
	m, err := rt.Decode(b.codec, payload)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if reg.Kind != ProcessManager {
		return safeInvoke(ctx, rt, nil, m)
	}
	// A pm goes through a StateStore as on the engine: state is loaded
	// (JSON) into a fresh NewState value, and saved only when the handle
	// method succeeds, so a failed call leaves no half-applied state.
	corr, err := safeCorrelate(rt, m)
	if err != nil {
		return err
	}
	ctx = WithCorrelation(ctx, corr)
	data, version, err := b.states.Load(ctx, reg.Name, corr)
	if err != nil {
		return err
	}
	state := reg.NewState()
	if data != nil {
		if err := json.Unmarshal(data, state); err != nil {
			return fmt.Errorf("decode state of pm %s for %q: %w", reg.Name, corr, err)
		}
	}
	if err := safeInvoke(ctx, rt, state, m); err != nil {
		return err
	}
	if data, err = json.Marshal(state); err != nil {
		return fmt.Errorf("encode state of pm %s for %q: %w", reg.Name, corr, err)
	}
	return b.states.Save(ctx, reg.Name, corr, data, version)
}

// States is the inline broker's pm state store, so a unit test can read
// the state a pm saved (Load it by pm name and correlation value).
func (b *InlineBroker) States() StateStore { return b.states }

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
