package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// PublisherOptions configure a Publisher. The zero value is ready to use.
type PublisherOptions struct {
	// Codec encodes payloads. Default JSON.
	Codec Codec
	// BackfillSuffix names the backfill lane and is a reserved key.
	// Default DefaultBackfillSuffix ("backfill"); must match the engines'.
	BackfillSuffix string
	// SignalMaxLen caps each category's wake-up stream (approximate
	// trimming). Default 10000; a value under 2000 counts as 2000, so an
	// engine that fell behind can tell that signals were trimmed before
	// it read them (it reads them 1000 at a time).
	SignalMaxLen int64
	// Logger receives the warning when an entry was stored but idle
	// consumers could not be woken (they find it at their next re-check,
	// within 30 s, or a second per partition the consumer owns beyond 30).
	// Default slog.Default().
	Logger *slog.Logger
	// DedupWindow is how long a message id given with WithMessageID is
	// remembered per partition: publishing the same id to the same
	// partition again within it stores nothing. Default 24h. Redis keeps
	// it in whole milliseconds: a window under 1 ms counts as 1 ms, and
	// any other is rounded up to the next millisecond.
	DedupWindow time.Duration
	// ResendWindow is how long the id Publish generates for a message
	// published without WithMessageID (and PublishBatch for each message)
	// is remembered per partition. The id makes the call idempotent: a
	// call that runs twice in Redis (go-redis resends one whose reply it
	// lost, a proxy or a cluster redirect replays one, and Publish itself
	// sends it again after a lost reply) stores the message once. It
	// only has to outlast those resends, which come within seconds, so it
	// is shorter than DedupWindow: each id is a key of about 100 bytes in
	// Redis for this long. Default 1 minute; negative: off, the message
	// is appended with a plain XADD and a call run twice may store it
	// twice.
	ResendWindow time.Duration
	// Propagator writes the trace context of Publish's ctx into the entry
	// (as fields named by it), for the engine's spans to link to; it must
	// match Options.Propagator. Default: W3C trace context
	// (propagation.TraceContext). Nothing is written when ctx carries no
	// span.
	Propagator propagation.TextMapPropagator
	// ReplicaAcks makes every Publish and PublishRecord of a partitioned
	// message wait until that many replicas have it, as
	// WaitForReplicas(ReplicaAcks, ReplicaTimeout) does (a
	// WaitForReplicas given to one Publish wins). Set it to the number of
	// replicas: a replica that did not acknowledge may be the one a
	// failover promotes. PublishBatch refuses to run with it set (it does
	// not wait). Default 0: no wait.
	ReplicaAcks int
	// ReplicaTimeout bounds ReplicaAcks's wait; past it the publish fails
	// with ErrNotDurable. Default 1s.
	ReplicaTimeout time.Duration
}

// Publisher writes messages to their streams: a partitioned message to its
// partition's stream, any other to its category's stream. Use one per
// process; it is safe for concurrent use.
type Publisher struct {
	c    redis.UniversalClient
	opts PublisherOptions
	// guesses remembers whom each partition's last publish woke, so the
	// next one wakes them in its first round trip (rdb.Guesses).
	guesses *rdb.Guesses
}

// MessagePublisher is implemented by the Redis Publisher and by the
// InlineBroker, so code that publishes can run on either.
type MessagePublisher interface {
	Publish(ctx context.Context, msg Message, opts ...PublishOption) error
}

var (
	_ MessagePublisher = (*Publisher)(nil)
	_ MessagePublisher = (*InlineBroker)(nil)
)

// NewPublisher returns a Publisher writing through c, configured by at most
// one PublisherOptions (none: all defaults).
func NewPublisher(c redis.UniversalClient, options ...PublisherOptions) *Publisher {
	var opts PublisherOptions
	if len(options) > 0 {
		opts = options[0]
	}
	return &Publisher{c: c, opts: opts.withDefaults(), guesses: rdb.NewGuesses()}
}

// withDefaults fills the zero fields of opts with their defaults.
func (opts PublisherOptions) withDefaults() PublisherOptions {
	if opts.Codec == nil {
		opts.Codec = JSON
	}
	if opts.BackfillSuffix == "" {
		opts.BackfillSuffix = DefaultBackfillSuffix
	}
	if opts.SignalMaxLen <= 0 {
		opts.SignalMaxLen = 10000
	}
	opts.SignalMaxLen = max(opts.SignalMaxLen, minSignalMaxLen)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReplicaTimeout <= 0 {
		opts.ReplicaTimeout = time.Second
	}
	if opts.DedupWindow <= 0 {
		opts.DedupWindow = 24 * time.Hour
	}
	// Under 1 ms it would be PX 0, which Redis refuses.
	opts.DedupWindow = max(opts.DedupWindow, time.Millisecond)
	if opts.ResendWindow == 0 {
		opts.ResendWindow = time.Minute
	}
	if opts.ResendWindow > 0 {
		opts.ResendWindow = max(opts.ResendWindow, time.Millisecond)
	}
	if opts.Propagator == nil {
		opts.Propagator = propagation.TraceContext{}
	}
	return opts
}

// PublishOption changes how one message is published.
type PublishOption func(*publishConfig)

type publishConfig struct {
	backfill bool
	id       string
	idSet    bool // WithMessageID was given (an empty id is refused)
	replicas int
	timeout  time.Duration
}

// WaitForReplicas makes Publish wait, after a partitioned message is
// stored, until n replicas of its partition's server have it (Redis WAIT
// on the connection that wrote it), at most timeout (0: without bound):
// for a caller that needs an acknowledged publish to survive a failover.
//
// n must be every replica. A failover may promote a replica that did not
// acknowledge: with two replicas and n = 1, a manual failover (SENTINEL
// FAILOVER) loses what the other one acknowledged, since the old primary
// takes writes until each client switches and its other replica follows
// it until then.
//
// When fewer acknowledge in time, Publish fails with ErrNotDurable, though
// the message is stored: it may survive a failover or not. Publish it
// again with WithMessageID, the same id as the first time: within the
// dedup window the server that has it stores nothing again (and the wait
// counts from that publish, so it covers the first append), and a new
// primary that lost it stores it. The outbox relay does this by itself
// (PublisherOptions.ReplicaAcks: every record has an id). Ignored for
// unpartitioned messages.
func WaitForReplicas(n int, timeout time.Duration) PublishOption {
	return func(c *publishConfig) { c.replicas, c.timeout = n, timeout }
}

// ErrNotDurable matches a publish (WaitForReplicas) whose message was
// stored but not acknowledged by the replicas asked for in time.
var ErrNotDurable = rdb.ErrNotReplicated

// WithMessageID publishes the message with the caller's id, an idempotency
// key: a message whose id was already published to its partition (or, for
// an unpartitioned category, to the category's stream) within
// PublisherOptions.DedupWindow is not stored again (and Publish returns
// nil), so a publish retried after an ambiguous failure (a timeout) is
// stored once. Handlers see the id in MessageFromContext(ctx).MessageID.
// The id follows the text rules of keys
// (non-empty UTF-8, at most MaxKeyLength bytes, no control characters),
// else Publish fails with ErrInvalidMessageID before writing anything.
func WithMessageID(id string) PublishOption {
	return func(c *publishConfig) { c.id, c.idSet = id, true }
}

// ErrInvalidMessageID matches a WithMessageID id that breaks the text
// rules of keys.
var ErrInvalidMessageID = errors.New("invalid message id")

// AsBackfill publishes to the partition's backfill lane
// (category:{key}:suffix), which its owner reads after the primary
// stream is drained. It is ignored for unpartitioned categories.
func AsBackfill() PublishOption { return func(c *publishConfig) { c.backfill = true } }

// ErrPublish matches failures to publish other than a bad key
// (ErrInvalidKey) or a bad message.
var ErrPublish = errors.New("publish failed")

// Publish validates msg's partition key, encodes it and writes it. A
// Partitioned message goes to its partition's stream, category:{key} (or
// its backfill lane), after its key is recorded in the category's index,
// and a wake-up signal follows it, to the instances that own the
// partition (or to every instance when none is known: docs/runtime.md,
// Publish); any other message goes to the stream
// named by its category. A bad key fails with a *KeyError (errors.Is
// ErrInvalidKey) before anything is written. When only the wake-up fails,
// the message is published: Publish logs a warning and returns nil.
func (p *Publisher) Publish(ctx context.Context, msg Message, opts ...PublishOption) error {
	var cfg publishConfig
	for _, o := range opts {
		o(&cfg)
	}
	it, err := p.prepare(ctx, msg, cfg)
	if err != nil {
		return err
	}
	return p.write(ctx, typeName(msg), it, cfg)
}

// write stores a prepared item; name labels errors.
//
// The item's message id makes the write idempotent (rdb.Once): with
// WithMessageID for DedupWindow, else for ResendWindow. So when the reply
// to a write is lost after Redis ran it, write sends it again itself
// (rdb.Resend) and the message is stored once: go-redis resends
// a single command or a pipeline, but not a MULTI/EXEC (v9.23 returns the
// error), and a caller who retried would publish a new id.
func (p *Publisher) write(ctx context.Context, name string, it item, cfg publishConfig) error {
	once := rdb.Once{Replicas: cfg.replicas, ReplicaTimeout: cfg.timeout, ID: it.id}
	if cfg.replicas <= 0 && p.opts.ReplicaAcks > 0 {
		once.Replicas, once.ReplicaTimeout = p.opts.ReplicaAcks, p.opts.ReplicaTimeout
	}
	once.Window = p.window(cfg.idSet)
	stream := it.stream
	if !it.partitioned {
		stream = it.category
	}
	send := func() error {
		if !it.partitioned {
			return rdb.PublishPlain(ctx, p.c, it.category, it.fields, once)
		}
		return rdb.PublishGuessing(ctx, p.c, p.guesses, it.category, it.key, it.stream, p.opts.SignalMaxLen, it.fields, once)
	}
	var err error
	if once.Window > 0 {
		err = rdb.Resend(ctx, send)
	} else {
		err = send()
	}
	if errors.Is(err, rdb.ErrUnsignalled) {
		// Published: failing the call would make the caller publish twice.
		p.opts.Logger.Warn("seqby: published, but waking idle consumers failed; they find the entry at their next re-check",
			"stream", it.stream, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish %s to %s: %w: %w", name, stream, ErrPublish, err)
	}
	return nil
}

// window is how long a message id is remembered: the caller's
// (WithMessageID, a record's) for DedupWindow, a generated one for
// ResendWindow (0: not at all).
func (p *Publisher) window(callers bool) time.Duration {
	if callers {
		return p.opts.DedupWindow
	}
	return max(p.opts.ResendWindow, 0)
}

// item is a message checked and encoded, ready to write.
type item struct {
	category, key, stream string // stream: for a partitioned message
	id                    string // the message id
	partitioned           bool
	fields                []any
}

// prepare checks msg (category, key, message id) and encodes it; nothing
// is written.
func (p *Publisher) prepare(ctx context.Context, msg Message, cfg publishConfig) (item, error) {
	r, err := newRecord(ctx, msg, p.opts.Codec, p.opts.Propagator, p.opts.BackfillSuffix, cfg)
	if err != nil {
		return item{}, err
	}
	return r.item(p.opts.BackfillSuffix), nil
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

// partitionKey reads and re-checks a Partitioned message's key against the
// configured backfill suffix (generated code checks against the default).
func partitionKey(msg Message, suffix string) (key string, partitioned bool, err error) {
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
	if err := checkKeySuffix(msg.StreamCategory(), "key", key, suffix); err != nil {
		return "", true, err
	}
	return key, true, nil
}

// bothPartitionings explains a message that is Partitioned and
// Unpartitioned at once, which seqgen never writes: it names the embedded
// field that brings either method, since promotion is the usual way there
// (seqgen refuses it, but a type may have changed since seqgen last ran).
func bothPartitionings(msg Message) error {
	var found []string
	for _, method := range []string{"PartitionKey", "SeqbyUnpartitioned"} {
		if path, decl := promotedFrom(reflect.TypeOf(msg), method, map[reflect.Type]bool{}); len(path) > 0 {
			found = append(found, fmt.Sprintf("%s brings %s, declared on %s", strings.Join(path, "."), method, decl))
		}
	}
	why := "neither is promoted from an embedded field, so one was declared on the type by hand or after seqgen last ran; run seqgen again, which refuses the type until it is fixed"
	if len(found) > 0 {
		why = "embedded field " + strings.Join(found, ", and field ") +
			"; run seqgen again, which refuses the type until it is fixed and says how"
	}
	return fmt.Errorf("%s has both a PartitionKey and a SeqbyUnpartitioned method (StreamCategory %q); seqgen writes one of them on a message type, never both: %s: %w",
		typeName(msg), msg.StreamCategory(), why, ErrPublish)
}

// promotedFrom finds the embedded fields through which t gets method by
// Go's rules (the shallowest wins), and the type that declares it; path
// is empty when t declares it itself or lacks it.
func promotedFrom(t reflect.Type, method string, seen map[reflect.Type]bool) (path []string, decl reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if declares(t, method) || t.Kind() != reflect.Struct || seen[t] {
		return nil, t
	}
	seen[t] = true
	defer delete(seen, t)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.Anonymous || !hasMethod(f.Type, method) {
			continue
		}
		sub, d := promotedFrom(f.Type, method, seen)
		if path == nil || len(sub)+1 < len(path) {
			path, decl = append([]string{f.Name}, sub...), d
		}
	}
	if path == nil {
		return nil, t // it has the method by no field we can see (a generic type's)
	}
	return path, decl
}

func hasMethod(t reflect.Type, method string) bool {
	if _, ok := t.MethodByName(method); ok {
		return true
	}
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		return false
	}
	_, ok := reflect.PointerTo(t).MethodByName(method)
	return ok
}

// declares reports whether t declares method itself, with a value or a
// pointer receiver, rather than by promotion: the compiler writes a
// promoted method (and a value method's pointer twin) as a wrapper whose
// position is "<autogenerated>". An interface declares its methods.
func declares(t reflect.Type, method string) bool {
	if t.Kind() == reflect.Interface {
		_, ok := t.MethodByName(method)
		return ok
	}
	for _, tt := range []reflect.Type{t, reflect.PointerTo(t)} {
		if m, ok := tt.MethodByName(method); ok {
			pc := m.Func.Pointer()
			if f := goruntime.FuncForPC(pc); f != nil {
				file, _ := f.FileLine(pc)
				return file != "<autogenerated>"
			}
			return false
		}
	}
	return false
}

// minSignalMaxLen keeps a signal stream at least two reads long: a reader
// whose read came back less than full was then never past the trimmed end
// (wake.Waiter).
const minSignalMaxLen = 2 * rdb.SignalBatch
