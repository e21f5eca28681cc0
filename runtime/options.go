package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Options configure an Engine. Zero fields take the documented defaults.
type Options struct {
	// OwnerID names this process incarnation in leases and consumer names.
	// It must be unique per incarnation (never reuse one after a restart).
	// Default: "<hostname>-<pid>-<random hex>".
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
	// DiscoveryInterval is how often the partition index and the member
	// set are read to claim new or free partitions and rebalance.
	// Default 1s.
	DiscoveryInterval time.Duration
	// MaxRetries is how many times a failing message is retried before
	// its partition halts. Default 3; negative means no retries.
	MaxRetries int
	// RetryBackoff is the first retry delay, doubled per retry up to
	// MaxBackoff. Defaults 100ms and 5s.
	RetryBackoff time.Duration
	// MaxBackoff caps the retry delay. Default 5s.
	MaxBackoff time.Duration
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
	// PartitionWarnThreshold logs a warning when a category has more
	// partitions than this (Redis partitions are for bounded key sets).
	// Default 2000.
	PartitionWarnThreshold int
	// BlockTimeout bounds each blocking wait for new data, which also
	// bounds how long shutdown waits for it. Default 1s.
	BlockTimeout time.Duration
	// StateStore keeps process manager state: loaded by correlation value
	// before a pm's handle method, saved (JSON) after it. Default: a
	// RedisStateStore on the engine's client, whose saves are fenced by
	// the pm lease.
	StateStore StateStore
}

func (o Options) withDefaults() (Options, error) {
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
	def(&o.DiscoveryInterval, time.Second)
	def(&o.RetryBackoff, 100*time.Millisecond)
	def(&o.MaxBackoff, 5*time.Second)
	def(&o.BlockTimeout, time.Second)
	if o.MaxRetries == 0 {
		o.MaxRetries = 3
	} else if o.MaxRetries < 0 {
		o.MaxRetries = 0
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PartitionWarnThreshold <= 0 {
		o.PartitionWarnThreshold = 2000
	}
	if o.HeartbeatInterval >= o.LeaseTTL-o.LeaseMargin {
		return o, fmt.Errorf("HeartbeatInterval %v must be well below LeaseTTL %v minus LeaseMargin %v; use LeaseTTL/5", o.HeartbeatInterval, o.LeaseTTL, o.LeaseMargin)
	}
	if err := CheckKey("", "BackfillSuffix", o.BackfillSuffix); err != nil && o.BackfillSuffix != DefaultBackfillSuffix {
		return o, fmt.Errorf("BackfillSuffix %q: %w", o.BackfillSuffix, err)
	}
	return o, nil
}
