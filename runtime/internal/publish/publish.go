package publish

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Message is an event or command, as runtime.Message.
type Message interface {
	StreamCategory() string
}

// Partitioned is a message of a partitioned category, as
// runtime.Partitioned.
type Partitioned interface {
	Message
	PartitionKey() (string, error)
}

// Unpartitioned is a message seqgen wrote as one of a category that is not
// partitioned, as runtime.Unpartitioned.
type Unpartitioned interface {
	Message
	SeqbyUnpartitioned()
}

// Encoder encodes a message for the payload field; runtime's Codec is one.
type Encoder interface {
	Marshal(v any) ([]byte, error)
}

// KeyRule checks a partition key against the key rules, with the backfill
// suffix the publisher is configured with; it returns nil or runtime's
// *KeyError, which category and field only label. The rules stay in
// runtime, beside KeyError and the generated code that calls them.
type KeyRule func(category, field, value, suffix string) error

// Config is what a Publisher needs: runtime builds it from
// PublisherOptions, whose fields of the same names it copies with their
// defaults filled in (they are documented there), and from its key rules.
type Config struct {
	Codec          Encoder
	BackfillSuffix string
	SignalMaxLen   int64
	Logger         *slog.Logger
	DedupWindow    time.Duration // for the caller's message ids
	ResendWindow   time.Duration // for generated ids; negative: none
	Propagator     propagation.TextMapPropagator
	ReplicaAcks    int // every partitioned publish waits for them
	ReplicaTimeout time.Duration
	// KeyRule re-checks a partition key against BackfillSuffix: generated
	// code checks against the default one only.
	KeyRule KeyRule
	// IDRule checks a caller's message id against the text rules of keys
	// (nil or one of runtime's rule errors).
	IDRule func(id string) error
}

// Call is how one message is published: what the options given to one
// Publish set.
type Call struct {
	Backfill bool          // AsBackfill
	ID       string        // WithMessageID's id
	IDSet    bool          // a caller's id was given (an empty one is refused)
	Replicas int           // WaitForReplicas's n; 0: the Config's ReplicaAcks
	Timeout  time.Duration // WaitForReplicas's timeout
}

// Publisher writes messages to their streams; it is safe for concurrent
// use.
type Publisher struct {
	c   redis.UniversalClient
	cfg Config
	// guesses remembers whom each partition's last publish woke, so the
	// next one wakes them in its first round trip (rdb.Guesses).
	guesses *rdb.Guesses
}

// New returns a Publisher writing through c.
func New(c redis.UniversalClient, cfg Config) *Publisher {
	return &Publisher{c: c, cfg: cfg, guesses: rdb.NewGuesses()}
}

// Publish checks msg, encodes it and writes it: the whole of
// runtime.Publisher.Publish once the options are applied.
func (p *Publisher) Publish(ctx context.Context, msg Message, call Call) error {
	it, err := p.Prepare(ctx, msg, call)
	if err != nil {
		return err
	}
	return p.write(ctx, TypeName(msg), it, call)
}

// write stores a prepared item; name labels errors.
//
// The item's message id makes the write idempotent (rdb.Once): a caller's
// id for DedupWindow, else for ResendWindow. So when the reply to a write
// is lost after Redis ran it, write sends it again itself (rdb.Resend) and
// the message is stored once: go-redis resends a single command or a
// pipeline, but not a MULTI/EXEC (v9.23 returns the error), and a caller
// who retried would publish a new id.
func (p *Publisher) write(ctx context.Context, name string, it Item, call Call) error {
	once := rdb.Once{Replicas: call.Replicas, ReplicaTimeout: call.Timeout, ID: it.ID}
	if call.Replicas <= 0 && p.cfg.ReplicaAcks > 0 {
		once.Replicas, once.ReplicaTimeout = p.cfg.ReplicaAcks, p.cfg.ReplicaTimeout
	}
	once.Window = p.window(call.IDSet)
	stream := it.Stream
	if !it.Partitioned {
		stream = it.Category
	}
	send := func() error {
		if !it.Partitioned {
			return rdb.PublishPlain(ctx, p.c, it.Category, it.Fields, once)
		}
		return rdb.PublishGuessing(ctx, p.c, p.guesses, it.Category, it.Key, it.Stream, p.cfg.SignalMaxLen, it.Fields, once)
	}
	var err error
	if once.Window > 0 {
		err = rdb.Resend(ctx, send)
	} else {
		err = send()
	}
	if errors.Is(err, rdb.ErrUnsignalled) {
		// Published: failing the call would make the caller publish twice.
		p.cfg.Logger.Warn("seqby: published, but waking idle consumers failed; they find the entry at their next re-check",
			"stream", it.Stream, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish %s to %s: %w: %w", name, stream, ErrPublish, err)
	}
	return nil
}

// window is how long a message id is remembered: the caller's (or a
// record's) for DedupWindow, a generated one for ResendWindow (0: not at
// all).
func (p *Publisher) window(callers bool) time.Duration {
	if callers {
		return p.cfg.DedupWindow
	}
	return max(p.cfg.ResendWindow, 0)
}

// Item is a message checked and encoded, ready to write.
type Item struct {
	Category, Key, Stream string // Stream: for a partitioned message
	ID                    string // the message id
	Partitioned           bool
	Fields                []any // the stream entry's fields
}

// Prepare checks msg (category, key, message id) and encodes it; nothing
// is written.
func (p *Publisher) Prepare(ctx context.Context, msg Message, call Call) (Item, error) {
	r, err := p.cfg.newRecord(ctx, msg, call)
	if err != nil {
		return Item{}, err
	}
	return r.item(p.cfg.BackfillSuffix), nil
}

// newRecord checks and encodes msg; Prepare and NewRecord share it.
func (cfg Config) newRecord(ctx context.Context, msg Message, call Call) (Record, error) {
	if msg == nil {
		return Record{}, fmt.Errorf("publish: nil message: %w", ErrPublish)
	}
	// A typed nil carries no event, and with value receivers even
	// StreamCategory panics on it: refuse it before calling anything.
	if IsNilPointer(msg) {
		return Record{}, fmt.Errorf("publish %T: the message is a nil pointer; pass a pointer to a message value: %w", PayloadOf(msg), ErrPublish)
	}
	category, err := streamCategory(msg)
	if err != nil {
		return Record{}, fmt.Errorf("publish %s: %w", TypeName(msg), err)
	}
	if err := checkCategory(category); err != nil {
		return Record{}, fmt.Errorf("publish %s: %w: %w", TypeName(msg), err, ErrPublish)
	}
	key, partitioned, err := PartitionKey(msg, cfg.BackfillSuffix, cfg.KeyRule)
	if err != nil {
		return Record{}, fmt.Errorf("publish %s: %w", TypeName(msg), err)
	}
	id := NewMessageID()
	if call.IDSet {
		if rule := cfg.IDRule(call.ID); rule != nil {
			return Record{}, fmt.Errorf("publish %s: message id %q: %w: %w", TypeName(msg), call.ID, ErrInvalidMessageID, rule)
		}
		id = call.ID
	}
	payload, err := cfg.Codec.Marshal(PayloadOf(msg))
	if err != nil {
		return Record{}, fmt.Errorf("publish %s: encode payload: %w", TypeName(msg), err)
	}
	return Record{Category: category, Key: key, Partitioned: partitioned, Backfill: call.Backfill && partitioned,
		Type: TypeName(msg), MessageID: id, Payload: payload, Trace: traceContext(ctx, cfg.Propagator)}, nil
}

// checkCategory refuses a category no stream can be named after.
func checkCategory(category string) error {
	if category == "" || strings.ContainsAny(category, "{}") {
		return fmt.Errorf("stream category %q is empty or contains '{' or '}'", category)
	}
	return nil
}

// streamCategory calls the message's StreamCategory, turning a panic (a
// hand-written method on a value it cannot handle) into an error.
func streamCategory(msg Message) (category string, err error) {
	defer func() {
		if p := recover(); p != nil {
			category, err = "", fmt.Errorf("StreamCategory panicked: %v: %w", p, ErrPublish)
		}
	}()
	return msg.StreamCategory(), nil
}

// PartitionKey reads a Partitioned message's key and re-checks it with
// rule against suffix (generated code checks against the default suffix);
// partitioned tells whether msg is Partitioned. The inline broker shares
// it.
func PartitionKey(msg Message, suffix string, rule KeyRule) (key string, partitioned bool, err error) {
	pm, ok := msg.(Partitioned)
	if !ok {
		return "", false, nil
	}
	defer func() {
		if p := recover(); p != nil { // e.g. a typed nil message
			key, err = "", fmt.Errorf("reading the partition key panicked: %v: %w", p, ErrPublish)
		}
	}()
	if _, ok := msg.(Unpartitioned); ok {
		// seqgen writes one of the two; the other is not its.
		return "", false, bothPartitionings(msg)
	}
	key, err = pm.PartitionKey()
	if err != nil {
		return "", true, err
	}
	if err := rule(msg.StreamCategory(), "key", key, suffix); err != nil {
		return "", true, err
	}
	return key, true, nil
}

// Foreign returns value as a Message of category, with wire type name
// name and, when key is not nil, the partition key it returns: what
// runtime.Foreign returns, for a type declared elsewhere.
func Foreign(value any, category, name string, key func() (string, error)) Message {
	f := foreign{value: value, category: category, name: name}
	if key == nil {
		return f
	}
	return foreignKeyed{foreign: f, key: key}
}

// foreign is a Foreign message of an unpartitioned category.
type foreign struct {
	value          any
	category, name string
}

func (f foreign) StreamCategory() string { return f.category }

// foreignKeyed is a Foreign message of a partitioned category.
type foreignKeyed struct {
	foreign
	key func() (string, error)
}

func (f foreignKeyed) PartitionKey() (string, error) { return f.key() }

// unwrapForeign returns the value a Foreign message carries, and whether
// msg is one.
func unwrapForeign(msg Message) (foreign, bool) {
	switch f := msg.(type) {
	case foreign:
		return f, true
	case foreignKeyed:
		return f.foreign, true
	}
	return foreign{}, false
}

// PayloadOf is what the codec encodes for msg: msg itself, or the value a
// Foreign message carries.
func PayloadOf(msg Message) any {
	if f, ok := unwrapForeign(msg); ok {
		return f.value
	}
	return msg
}

// IsNilPointer reports whether msg (or the value a Foreign message
// carries) is a nil pointer.
func IsNilPointer(msg Message) bool {
	v := reflect.ValueOf(PayloadOf(msg))
	return !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil()
}

// TypeName is a message's wire name: its Go type name (pointer stripped),
// the value seqgen writes in Route.Type, or a Foreign message's name.
func TypeName(m Message) string {
	if f, ok := unwrapForeign(m); ok {
		return f.name
	}
	t := reflect.TypeOf(m)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.Name()
}

// NewMessageID returns a generated message id: 128 random bits in hex.
func NewMessageID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// traceContext is the trace context of ctx as prop writes it into an
// entry's fields (fields leaves out any name the entry uses itself); nil
// when ctx carries no span, to keep the entry small.
func traceContext(ctx context.Context, prop propagation.TextMapPropagator) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	prop.Inject(ctx, carrier)
	return carrier
}

// fields are the stream entry fields of r.
func (r Record) fields(publishedAt time.Time) []any {
	f := []any{
		rdb.FieldType, r.Type,
		rdb.FieldID, r.MessageID,
		rdb.FieldPayload, r.Payload,
		rdb.FieldPublishedAt, publishedAt.UTC().Format(time.RFC3339Nano),
	}
	for k, v := range r.Trace {
		if !rdb.OwnField(k) {
			f = append(f, k, v)
		}
	}
	return f
}

// item is r ready to write, its stream named with the backfill suffix.
func (r Record) item(suffix string) Item {
	it := Item{Category: r.Category, Key: r.Key, ID: r.MessageID, Partitioned: r.Partitioned, Fields: r.fields(time.Now())}
	if r.Partitioned {
		it.Stream = rdb.PartitionStream(r.Category, r.Key)
		if r.Backfill {
			it.Stream = rdb.BackfillStream(r.Category, r.Key, suffix)
		}
	}
	return it
}
