package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/seqby/seqby/runtime/internal/lease"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Options configure an Engine. Zero fields take the documented defaults.
// Durations are time.Duration values; one set above zero but under a
// millisecond is refused by NewEngine with ErrOptions, as Redis would
// truncate it to 0 (almost always a unit mistake: 15000 is 15µs).
type Options struct {
	// OwnerID names this instance for operators: in halt records, member
	// sets, Status and logs. Lease tokens and consumer names add a random
	// incarnation to it ("<OwnerID>~<random>"), so a restarted process may
	// reuse its OwnerID; two live processes may not: Run refuses the
	// second with ErrOwnerInUse (it waits out, up to LeaseTTL, the OwnerID
	// of a killed process). Default: "<hostname>-<pid>-<random hex>".
	OwnerID string
	// LeaseTTL is how long a partition lease lives without a renew: the
	// failover time after a crash or stall. Default 15s.
	LeaseTTL time.Duration
	// HeartbeatInterval is how often owned leases are renewed and the
	// instance announces itself. Default LeaseTTL/5.
	HeartbeatInterval time.Duration
	// LeaseMargin: an owner counts its lease lost at last renew + LeaseTTL
	// - LeaseMargin on its monotonic clock, and cancels the handler's
	// context then. Default LeaseTTL/10.
	LeaseMargin time.Duration
	// VerifyBound is the fence rule's bound: a handler attempt starts
	// only within VerifyBound of sending a call that confirmed the lease
	// in Redis (the fenced read that returned the entry, or a
	// verification sent for the attempt). Default 25ms. Keep it above
	// Redis's round trip: a confirmation whose reply comes later is
	// still used (the attempt starts right after it, never with an older
	// one), with a warning to raise it, once the engine has stored an
	// admitted confirmation age above that reply's, which an operator's
	// Pause then waits out (at most LeaseTTL/2).
	VerifyBound time.Duration
	// DiscoveryInterval is how often the partition index and the member
	// set are read to claim new or free partitions and rebalance.
	// Default 1s.
	DiscoveryInterval time.Duration
	// Retry is how a failing message is retried before its partition
	// halts, and how its halted head is retried after: MaxRetries default
	// 3, RetryBackoff 100ms doubling up to MaxBackoff 5s,
	// HaltedRetryInterval 1m (RetryPolicy says what each means). The
	// backoffs also pace the engine's retries of failed Redis calls.
	// Registration.Retry overrides it per handler, field by field.
	Retry RetryPolicy
	// HandlerTimeout bounds one handler attempt: its context is cancelled
	// then and the attempt counts as failed (ErrHandlerTimeout). A body
	// that ignores its context and runs on is logged as stuck. Default 5m;
	// negative: none. Registration.Timeout overrides it per handler.
	HandlerTimeout time.Duration
	// MaxDeliveries halts a partition, without running the handler again,
	// on a head delivered more often than this: each owner that read it
	// counts once, so a message that kills the process handling it (a
	// stack overflow, an OOM kill) stops after that many owners instead of
	// taking down every instance in turn. A read whose reply was lost and
	// that the client sent again counts once more (docs/runtime.md, Every
	// call may run twice), so leave room above 1. Default 10; negative: no
	// limit.
	MaxDeliveries int
	// ReadAhead is how many new entries of a keyed partition one fenced
	// read takes at most. The ones after the first wait in memory, and
	// pending in Redis under this owner, until the entry before them is
	// acked; each ack is still fenced and sent before the next entry runs,
	// so at most the one in-flight entry runs again after a crash, and a
	// successor takes the read-ahead ones over in order (an entry read
	// ahead and never run counts one delivery toward MaxDeliveries all the
	// same). A larger value saves Redis calls on a busy key; 1 reads one
	// entry at a time. Process managers read one entry at a time. A
	// batched handler (Registration.AckBatch) reads AckBatch when that is
	// more, and runs them without waiting for each ack. Default 16, at
	// most 1000.
	ReadAhead int
	// Concurrency caps handler calls running at once in this instance
	// (one per partition at most). Default 64.
	Concurrency int
	// BackfillSuffix names backfill lanes; it must match the publisher's.
	// Default DefaultBackfillSuffix.
	BackfillSuffix string
	// Codec decodes payloads; it must match the publisher's. Default JSON.
	Codec Codec
	// Logger receives the engine's logs. Default slog.Default().
	Logger *slog.Logger
	// OnHalt is called (from an engine goroutine) when a partition halts
	// on a message it cannot process. Optional.
	OnHalt func(Halt)
	// OnFault is called (from an engine goroutine) when a partition cannot
	// be served: released after permanent Redis errors, or left without an
	// owner (Fault). Optional.
	OnFault func(Fault)
	// NewHandlerStart is where a handler that has never run (its group
	// unknown to Redis) starts reading: StartFromRetained (default), the
	// first entry retention kept, or StartFromNew, only entries published
	// after it first starts. A handler's start is fixed at its first Run.
	NewHandlerStart GroupStart
	// AllowEviction lets Run start when a server's maxmemory-policy is not
	// noeviction, with a warning. By default Run refuses (ErrEvictionPolicy):
	// under any other policy Redis may evict seqby's keys, a lease (then two
	// owners), a stream or a generation counter. Set it only for a Redis
	// that never reaches maxmemory. Default false.
	AllowEviction bool
	// SkipEvictionCheck is for a server known to have no CONFIG command,
	// such as an embedded Redis in tests and demos: Run neither checks
	// maxmemory-policy nor warns that it could not. Leave it false for a
	// real Redis, managed services included: one that refuses CONFIG is
	// still logged as unchecked, a reminder to set noeviction there.
	// Default false.
	SkipEvictionCheck bool
	// ReplicaAcks turns on the strict replication mode
	// (docs/runtime.md, "Failover"): no handler attempt of a keyed
	// handler or pm starts until every write the engine made before it
	// (the lease's acquire, the acks of the entries before, what the
	// handler committed through the engine's client) is on ReplicaAcks
	// replicas of the same primary, confirmed by a barrier (a write and
	// WAIT on one connection) shared by every partition waiting at that
	// moment. A failover to a replica that acknowledged then keeps the
	// default promise: only the event in flight can run again, and no two
	// owners. A partition whose writes straddle a change of primary is
	// let go and claimed afresh. Set it to the number of replicas: a
	// replica that did not acknowledge may be the one promoted (with two
	// replicas and ReplicaAcks 1, a manual failover can lose what the
	// other one acknowledged). While fewer replicas answer, no attempt
	// starts. Run refuses when the primary has fewer replicas connected
	// (ErrReplicas). On a Redis Cluster the same holds per shard: a
	// barrier per primary covers the slots it serves (a partition's keys
	// share one), and Run refuses when any primary has fewer replicas
	// connected; an unkeyed handler's ack waits for its entry's slot
	// only, so what it commits to keys of other slots is not covered.
	// Default 0: off.
	ReplicaAcks int
	// ReplicaTimeout is how long one replica barrier waits for
	// ReplicaAcks replicas (WAIT's timeout) before it is sent again. Keep
	// it below the client's ReadTimeout (go-redis's default is 3s).
	// Default 1s.
	ReplicaTimeout time.Duration
	// ReapAfter is how long a partition must stay cold (its lanes empty,
	// nothing pending in any group, nothing published to it) before its
	// owner lets it go and the maintenance leader (one engine instance
	// for all) removes its streams, groups, generations and index entry;
	// a later publish to the key recreates it. Engines reading a category
	// with different values reap it by the largest. Default 1h; negative:
	// never reap (the engine announces no category and never leads).
	ReapAfter time.Duration
	// PartitionWarnThreshold logs a warning when a category has more
	// partitions than this (Redis partitions are for bounded key sets).
	// Default 2000.
	PartitionWarnThreshold int
	// BlockTimeout bounds each blocking wait for new data, which also
	// bounds how long shutdown waits for it. Default 1s.
	BlockTimeout time.Duration
	// MeterProvider receives the engine's metrics (docs/operating.md,
	// "Metrics, tracing and health"). Default: none (a no-op provider).
	MeterProvider metric.MeterProvider
	// TracerProvider starts a consumer span per handler attempt, linked to
	// the span the message was published under (docs/operating.md,
	// "Metrics, tracing and health"). Default: none (no spans).
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context the publisher wrote into an
	// entry; it must match PublisherOptions.Propagator. Default: W3C
	// trace context (propagation.TraceContext).
	Propagator propagation.TextMapPropagator
	// HaltRealertInterval is how often a halted partition is reported
	// again (logged and passed to OnHalt, with Halt.Alerts counting) while
	// it stays halted on its owner. Default 15m; negative: once only.
	HaltRealertInterval time.Duration
	// StateStore keeps process manager state: loaded by correlation value
	// before a pm's handle method, saved (JSON) after it. Default: a
	// RedisStateStore on the engine's client, whose saves are fenced by
	// the pm lease.
	StateStore StateStore
}

// checkDurations rejects a duration set above zero but under a
// millisecond. Redis counts lease TTLs and BLOCK in milliseconds, so such
// a value truncates to 0: a lease acquired with PX 0 fails every time,
// and BLOCK 0 waits forever. It is nearly always a unit mistake (15000
// meant as milliseconds is 15µs in a time.Duration).
func (o Options) checkDurations() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"LeaseTTL", o.LeaseTTL}, {"HeartbeatInterval", o.HeartbeatInterval}, {"LeaseMargin", o.LeaseMargin}, {"VerifyBound", o.VerifyBound},
		{"DiscoveryInterval", o.DiscoveryInterval}, {"Retry.RetryBackoff", o.Retry.RetryBackoff},
		{"Retry.MaxBackoff", o.Retry.MaxBackoff}, {"Retry.HaltedRetryInterval", o.Retry.HaltedRetryInterval}, {"HandlerTimeout", o.HandlerTimeout}, {"BlockTimeout", o.BlockTimeout}, {"ReapAfter", o.ReapAfter},
		{"HaltRealertInterval", o.HaltRealertInterval}, {"ReplicaTimeout", o.ReplicaTimeout},
	} {
		if d.v > 0 && d.v < time.Millisecond {
			return fmt.Errorf("%w: %s is %v (%d ns), under the 1ms Redis resolution: Options durations are time.Duration values, write e.g. 15*time.Second, not 15000 (or leave it zero for the default)",
				ErrOptions, d.name, d.v, int64(d.v))
		}
	}
	return nil
}

func (o Options) withDefaults() (Options, error) {
	if err := o.checkDurations(); err != nil {
		return o, err
	}
	if o.OwnerID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		o.OwnerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.LeaseTTL, 15*time.Second)
	def(&o.HeartbeatInterval, o.LeaseTTL/5)
	def(&o.LeaseMargin, o.LeaseTTL/10)
	def(&o.VerifyBound, lease.DefaultVerifyBound)
	def(&o.DiscoveryInterval, time.Second)
	def(&o.Retry.RetryBackoff, 100*time.Millisecond)
	def(&o.Retry.MaxBackoff, 5*time.Second)
	if o.HandlerTimeout == 0 {
		o.HandlerTimeout = 5 * time.Minute
	}
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = 10
	}
	if o.Retry.HaltedRetryInterval == 0 {
		o.Retry.HaltedRetryInterval = time.Minute
	}
	def(&o.BlockTimeout, time.Second)
	if o.ReapAfter == 0 {
		o.ReapAfter = time.Hour
	}
	if o.Retry.MaxRetries == 0 {
		o.Retry.MaxRetries = 3
	} else if o.Retry.MaxRetries < 0 {
		o.Retry.MaxRetries = 0
	}
	if o.ReadAhead <= 0 {
		o.ReadAhead = 16
	}
	if o.ReadAhead > 1000 {
		return o, fmt.Errorf("%w: ReadAhead %d is above 1000; entries read ahead wait in memory, and a few dozen already take nearly all the Redis calls a busy key can save", ErrOptions, o.ReadAhead)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.BackfillSuffix == "" {
		o.BackfillSuffix = DefaultBackfillSuffix
	}
	if o.Codec == nil {
		o.Codec = JSON
	}
	if o.Propagator == nil {
		o.Propagator = propagation.TraceContext{}
	}
	if o.HaltRealertInterval == 0 {
		o.HaltRealertInterval = 15 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReplicaAcks < 0 {
		return o, fmt.Errorf("%w: ReplicaAcks %d is negative; set it to the number of replicas, or 0 for the default mode", ErrOptions, o.ReplicaAcks)
	}
	def(&o.ReplicaTimeout, time.Second)
	if o.PartitionWarnThreshold <= 0 {
		o.PartitionWarnThreshold = 2000
	}
	if o.HeartbeatInterval >= o.LeaseTTL-o.LeaseMargin {
		return o, fmt.Errorf("%w: HeartbeatInterval %v must be below LeaseTTL %v minus LeaseMargin %v (LeaseTTL/5 is a good value)", ErrOptions, o.HeartbeatInterval, o.LeaseTTL, o.LeaseMargin)
	}
	if err := CheckKey("", "BackfillSuffix", o.BackfillSuffix); err != nil && o.BackfillSuffix != DefaultBackfillSuffix {
		return o, fmt.Errorf("%w: BackfillSuffix %q: %w", ErrOptions, o.BackfillSuffix, err)
	}
	return o, nil
}
