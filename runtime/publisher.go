package runtime

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"

	"github.com/seqby/seqby/runtime/internal/publish"
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
	p *publish.Publisher
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
	return &Publisher{p: publish.New(c, opts.withDefaults().config())}
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

// config is what package publish needs of opts, which has its defaults,
// with the key rules, which stay here beside KeyError.
func (opts PublisherOptions) config() publish.Config {
	return publish.Config{
		Codec:          opts.Codec,
		BackfillSuffix: opts.BackfillSuffix,
		SignalMaxLen:   opts.SignalMaxLen,
		Logger:         opts.Logger,
		DedupWindow:    opts.DedupWindow,
		ResendWindow:   opts.ResendWindow,
		Propagator:     opts.Propagator,
		ReplicaAcks:    opts.ReplicaAcks,
		ReplicaTimeout: opts.ReplicaTimeout,
		KeyRule:        checkKeySuffix,
		IDRule:         textRule,
	}
}

// PublishOption changes how one message is published.
type PublishOption func(*publishConfig)

// publishConfig is what the options of one publish set; package publish
// reads it.
type publishConfig = publish.Call

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
	return func(c *publishConfig) { c.Replicas, c.Timeout = n, timeout }
}

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
	return func(c *publishConfig) { c.ID, c.IDSet = id, true }
}

// AsBackfill publishes to the partition's backfill lane
// (category:{key}:suffix), which its owner reads after the primary
// stream is drained. It is ignored for unpartitioned categories.
func AsBackfill() PublishOption { return func(c *publishConfig) { c.Backfill = true } }

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
	return p.p.Publish(ctx, msg, cfg)
}

// minSignalMaxLen keeps a signal stream at least two reads long: a reader
// whose read came back less than full was then never past the trimmed end
// (wake.Waiter).
const minSignalMaxLen = 2 * rdb.SignalBatch
