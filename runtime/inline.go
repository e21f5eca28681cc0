package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/publish"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// InlineBroker runs handlers in process, one message at a time in
// submission order, the way the engine runs them, so it is how handlers
// are unit-tested (the seqbytest package wraps it for tests). Keyed
// handlers are accepted (it advertises StreamPartitioning: with one
// goroutine and submission order, sequential by key holds trivially).
// Each message is encoded and decoded with the codec, as on the wire.
//
// As on the engine, a keyed handler's or a sequential pm's message runs
// with a lease in its context (LeaseFromContext: generation 1, token
// "inline:1", the LeaseKey the engine would use; UseRedis writes it in a
// Redis too, for handlers that fence their effects there) and its MessageInfo
// (MessageFromContext); a failing message is retried at once, up to the
// registration's MaxRetries (default 3, Permanent errors not at all), and
// then its partition halts: the message stays the partition's head, and
// the handler's later messages of that key are held, not delivered, until
// the test resolves the halt with Skip or Retry. Halts lists them. Other
// keys, and other handlers of the same message, go on. An unkeyed
// handler's failure halts nothing (the engine moves on too).
type InlineBroker struct {
	reg   *Registry
	codec Codec
	// exec runs each attempt as the engine's executor does, without a
	// timeout or telemetry: the handlers are never added to it.
	exec *executor.Executor

	mu       sync.Mutex
	queue    []Message
	draining bool
	states   *MemoryStateStore
	seq      int64                    // entry ids handed out
	parts    map[inlineID]*inlinePart // halted partitions
	leases   redis.UniversalClient    // UseRedis: where the leases are written
}

// inlineID names a partition of the inline broker: a handler and a key
// (a pm's correlation value).
type inlineID struct{ handler, key string }

// inlinePart is a halted partition: its head and the messages held behind
// it, in order.
type inlinePart struct {
	halt Halt
	head inlineMsg
	held []inlineMsg
}

// inlineMsg is one delivery of a message to a registration.
type inlineMsg struct {
	reg     Registration
	rt      Route
	payload []byte
	en      rdb.Entry // its entry as the engine would see it
}

// inlineToken is the lease token of every inline partition.
const inlineToken = "inline:1"

// NewInlineBroker returns an empty inline broker. It encodes with the
// given codec, or JSON when none (or nil) is given.
func NewInlineBroker(codecs ...Codec) *InlineBroker {
	codec := JSON
	if len(codecs) > 0 && codecs[0] != nil {
		codec = codecs[0]
	}
	return &InlineBroker{reg: NewRegistry("inline", StreamPartitioning), codec: codec, exec: executor.New(executor.Config{}),
		states: NewMemoryStateStore(), parts: map[inlineID]*inlinePart{}}
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
// never run inside it. Publish returns the errors of the messages it
// delivered that failed for good (joined; each wraps the handler's last
// error), whether or not they halted a partition; a message held behind a
// halted head is no error. A backfill option is accepted and ignored:
// there is one lane, submission order.
func (b *InlineBroker) Publish(ctx context.Context, msg Message, _ ...PublishOption) error {
	if publish.IsNilPointer(msg) {
		return fmt.Errorf("inline publish %T: nil message; pass a pointer to a message value: %w", publish.PayloadOf(msg), ErrPublish)
	}
	if _, _, err := publish.PartitionKey(msg, DefaultBackfillSuffix, checkKeySuffix); err != nil {
		return fmt.Errorf("inline publish %s: %w", publish.TypeName(msg), err)
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
	payload, err := b.codec.Marshal(publish.PayloadOf(msg))
	if err != nil {
		return fmt.Errorf("inline: encode %s: %w", publish.TypeName(msg), err)
	}
	key, _, _ := publish.PartitionKey(msg, DefaultBackfillSuffix, checkKeySuffix)
	b.mu.Lock()
	b.seq++
	id := fmt.Sprintf("%d-0", b.seq)
	b.mu.Unlock()
	var errs []error
	for _, reg := range b.reg.Registrations() {
		rt, ok := routeFor(reg, msg.StreamCategory(), publish.TypeName(msg))
		if !ok {
			continue
		}
		stream := msg.StreamCategory()
		if key != "" {
			stream = rdb.PartitionStream(stream, key)
		}
		m := inlineMsg{reg: reg, rt: rt, payload: payload, en: rdb.Entry{Stream: stream, ID: id, Fields: map[string]string{
			rdb.FieldType: publish.TypeName(msg), rdb.FieldID: publish.NewMessageID(), rdb.FieldPublishedAt: time.Now().UTC().Format(time.RFC3339Nano)}}}
		if err := b.run(ctx, m); err != nil {
			errs = append(errs, fmt.Errorf("handler %s on %s: %w", reg.Name, publish.TypeName(msg), err))
		}
	}
	return errors.Join(errs...)
}

// run delivers m unless its partition is halted (then it is held), with
// retries; a failure for good halts a keyed or sequential partition.
func (b *InlineBroker) run(ctx context.Context, m inlineMsg) error {
	id, partitioned, err := b.partitionOf(m)
	if err != nil {
		return err
	}
	if partitioned {
		b.mu.Lock()
		if p := b.parts[id]; p != nil {
			p.held = append(p.held, m)
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
	}
	err = b.attempts(ctx, m, id, partitioned, b.maxRetries(m.reg))
	if err != nil && partitioned {
		b.halt(id, m, err)
	}
	return err
}

// partitionOf is the partition m runs in: its key for a keyed handler, its
// correlation value for a sequential pm; partitioned is false for an
// unkeyed handler or a pm that is not sequential.
func (b *InlineBroker) partitionOf(m inlineMsg) (inlineID, bool, error) {
	switch {
	case m.reg.Kind == ProcessManager && m.reg.Sequential:
		payloadMsg, err := m.rt.Decode(b.codec, m.payload)
		if err != nil {
			return inlineID{}, false, fmt.Errorf("decode: %w", err)
		}
		corr, err := executor.Correlate(routeOf(m.rt, b.codec), payloadMsg)
		if err != nil {
			return inlineID{}, false, err
		}
		return inlineID{m.reg.Name, corr}, true, nil
	case m.reg.Kind != ProcessManager && m.rt.PartitionKey != nil:
		payloadMsg, err := m.rt.Decode(b.codec, m.payload)
		if err != nil {
			return inlineID{}, false, fmt.Errorf("decode: %w", err)
		}
		key, err := m.rt.PartitionKey(payloadMsg)
		if err != nil {
			return inlineID{}, false, err
		}
		return inlineID{m.reg.Name, key}, true, nil
	}
	return inlineID{}, false, nil
}

// maxRetries is reg's retry count, as the engine's default policy.
func (b *InlineBroker) maxRetries(reg Registration) int {
	if r := reg.Retry; r != nil {
		switch {
		case r.MaxRetries < 0:
			return 0
		case r.MaxRetries > 0:
			return r.MaxRetries
		}
	}
	return 3
}

// attempts runs m up to 1+retries times, at once (no backoff: a unit test
// does not wait), stopping at a Permanent error.
func (b *InlineBroker) attempts(ctx context.Context, m inlineMsg, id inlineID, partitioned bool, retries int) error {
	var err error
	for attempt := 1; attempt <= 1+retries; attempt++ {
		actx := ctx
		if partitioned {
			li := b.lease(m, id)
			b.mu.Lock()
			c := b.leases
			b.mu.Unlock()
			if c != nil {
				if err := c.Set(ctx, li.LeaseKey, li.Token, inlineLeaseTTL).Err(); err != nil {
					return fmt.Errorf("inline: write the lease of %s: %w", id.key, err)
				}
			}
			actx = executor.WithLease(ctx, executor.LeaseInfo(li))
		}
		m.en.Deliveries = 1
		err = b.exec.Attempt(actx, m.reg.Name, m.rt.Category, m.en, attempt, func(ctx context.Context) error {
			return b.invoke(ctx, m.reg, m.rt, m.payload)
		})
		if err == nil || errors.Is(err, ErrPermanent) {
			return err
		}
	}
	return err
}

// lease is the lease a message of partition id runs under: the one the
// engine would use, at generation 1.
func (b *InlineBroker) lease(m inlineMsg, id inlineID) LeaseInfo {
	li := LeaseInfo{Handler: m.reg.Name, Category: m.rt.Category, Key: id.key, Token: inlineToken, Generation: 1,
		LeaseKey: rdb.LeaseKey(rdb.PartitionStream(m.rt.Category, id.key), m.reg.Name)}
	if m.reg.Kind == ProcessManager {
		li.Category, li.LeaseKey = strings.Join(categories(m.reg), ","), rdb.PMLeaseKey(m.reg.Name, id.key)
	}
	return li
}

// halt makes m the head of its halted partition.
func (b *InlineBroker) halt(id inlineID, m inlineMsg, err error) {
	h := Halt{Handler: id.handler, Category: m.rt.Category, Key: id.key, Stream: m.en.Stream, EntryID: m.en.ID,
		MessageType: m.en.Fields[rdb.FieldType], MessageID: m.en.Fields[rdb.FieldID], Reason: "handler failed",
		Permanent: errors.Is(err, ErrPermanent), Err: err, Owner: "inline", Generation: 1, At: time.Now(), Alerts: 1}
	b.mu.Lock()
	b.parts[id] = &inlinePart{halt: h, head: m}
	b.mu.Unlock()
}

// UseRedis makes the broker write each partition's lease in c (its
// LeaseKey set to its Token) before the partition's message runs, so a
// handler that fences its effects in Redis, as docs/runtime.md ("Status,
// halts and the lease in a handler") advises (a script that checks
// GET(LeaseKey) == Token before it writes), runs as on the engine. Without it the lease is only in the context. Call it before
// the first Publish.
func (b *InlineBroker) UseRedis(c redis.UniversalClient) {
	b.mu.Lock()
	b.leases = c
	b.mu.Unlock()
}

// inlineLeaseTTL bounds the leases UseRedis writes: a test's Redis is
// short-lived, and nothing renews them.
const inlineLeaseTTL = time.Hour

// Halts returns the halted partitions, sorted by handler and key.
func (b *InlineBroker) Halts() []Halt {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Halt, 0, len(b.parts))
	for _, p := range b.parts {
		out = append(out, p.halt)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Handler != out[j].Handler {
			return out[i].Handler < out[j].Handler
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Skip resolves the halt of handler's partition key as an operator's skip
// does: the head is dropped without being applied, and the messages held
// behind it are delivered in order (one of them may halt the partition
// again). It returns their errors, as Publish does, or ErrNotHalted.
func (b *InlineBroker) Skip(ctx context.Context, handler, key string) error {
	return b.resume(ctx, handler, key, false)
}

// Retry runs the halted head of handler's partition key once more, as
// the engine's slow retry does: on success the held messages are
// delivered in order; on failure the partition stays halted, and the
// error is returned. ErrNotHalted when it is not halted.
func (b *InlineBroker) Retry(ctx context.Context, handler, key string) error {
	return b.resume(ctx, handler, key, true)
}

func (b *InlineBroker) resume(ctx context.Context, handler, key string, retry bool) error {
	id := inlineID{handler, key}
	b.mu.Lock()
	p := b.parts[id]
	b.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s of handler %s: %w", key, handler, ErrNotHalted)
	}
	if retry {
		if err := b.attempts(ctx, p.head, id, true, 0); err != nil {
			b.mu.Lock()
			p.halt.Err, p.halt.Permanent = err, errors.Is(err, ErrPermanent)
			b.mu.Unlock()
			return fmt.Errorf("handler %s, retry of the halted head: %w", handler, err)
		}
	}
	b.mu.Lock()
	delete(b.parts, id)
	held := p.held
	b.mu.Unlock()
	var errs []error
	for i, m := range held {
		if err := b.run(ctx, m); err != nil {
			errs = append(errs, fmt.Errorf("handler %s on %s: %w", handler, m.en.Fields[rdb.FieldType], err))
			b.mu.Lock()
			b.parts[id].held = append(b.parts[id].held, held[i+1:]...) // still behind the new head
			b.mu.Unlock()
			break
		}
	}
	return errors.Join(errs...)
}

func (b *InlineBroker) invoke(ctx context.Context, reg Registration, rt Route, payload []byte) error {
	m, err := rt.Decode(b.codec, payload)
	if err != nil {
		return Permanent(fmt.Errorf("decode: %w", err))
	}
	if reg.Kind != ProcessManager {
		return executor.Invoke(ctx, routeOf(rt, b.codec), nil, m)
	}
	// A pm goes through a StateStore as on the engine: state is loaded
	// (JSON) into a fresh NewState value, and saved only when the handle
	// method succeeds, so a failed call leaves no half-applied state.
	corr, err := executor.Correlate(routeOf(rt, b.codec), m)
	if err != nil {
		return Permanent(err)
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
	if err := executor.Invoke(ctx, routeOf(rt, b.codec), state, m); err != nil {
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
