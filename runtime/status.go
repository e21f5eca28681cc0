package runtime

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/executor"
)

// Halt describes a partition stopped on a message it cannot process. The
// message stays pending as the partition's head; nothing later for the key
// is applied until an operator resolves the head.
type Halt struct {
	Handler     string // Registration.Name (the consumer group)
	Category    string // stream category
	Key         string // partition key ("" for an unpartitioned category)
	Stream      string // lane holding the message
	EntryID     string // stream entry id of the head
	MessageType string // the "type" field of the entry ("" when missing)
	MessageID   string // the "id" field of the entry
	Reason      string // why it halted
	// Permanent: the failure cannot pass by itself (the handler returned
	// Permanent(err), or the entry cannot be decoded or routed), so the
	// head waits for an operator. Otherwise it is retried every
	// HaltedRetryInterval and the partition resumes when it succeeds.
	Permanent  bool
	Err        error     // the last handler or decode error
	Owner      string    // OwnerID of the instance that halted it
	Generation int64     // lease generation at the halt (0 when unleased)
	At         time.Time // when it halted
	// Alerts counts the reports of this halt by its owner: 1 the first
	// time, then one more each HaltRealertInterval while it stays halted.
	Alerts int
}

// PartitionStatus is one partition this instance owns. For a sequential
// pm it is one correlation value: Key is the value, Category the pm's
// categories joined by ",", Stream the value's first stream.
type PartitionStatus struct {
	Handler    string // Registration.Name
	Category   string // for a pm, its categories joined by ","
	Key        string // partition key, or a pm's correlation value
	Stream     string // the partition stream (for a pm, its first stream)
	Token      string // lease token, the consumer name: <owner_id>~<incarnation>:<generation>
	Generation int64  // the lease's generation, larger for every later owner (see LeaseInfo.Generation)
	Halted     bool   // the partition's head failed for good: nothing later of its key runs until resolved
	Halt       *Halt  // set when Halted
	// Paused: the partition's worker stopped for an operator's pause of
	// the partition (inspect.Inspector.Pause) or of its handler, as its
	// last confirmation or its handler's last discovery cycle found: the
	// entry in flight finished, and nothing later of its key starts until
	// it is resumed. The lease stays held. Pause wakes an idle owner, so
	// its partition shows here at once; a paused handler's idle
	// partitions show once something wakes them (Status.PausedHandlers
	// names the handler from the cycle that found its pause, and the
	// seqby.partitions.paused gauge counts all they own then).
	Paused bool
}

// Status is a snapshot of an engine instance.
type Status struct {
	OwnerID string // Options.OwnerID of this instance
	Running bool   // between Run's start and its return
	// Consuming: Run has started: the handlers are registered in Redis (a
	// StartFromNew handler's start is fixed) and consumption has begun.
	// False again once Run returns.
	Consuming  bool
	Partitions []PartitionStatus // owned partitions, sorted by handler, stream
	// Halts lists halts of unkeyed handlers and of pms that are not
	// sequential (messages left pending after their retries, on any
	// category); a keyed partition's or sequential pm value's halt is in
	// Partitions.
	Halts []Halt
	// LargeCategories are the categories whose partition count exceeded
	// Options.PartitionWarnThreshold at their last discovery, with that
	// count: partitioned streams suit bounded key sets. Nil when none.
	LargeCategories map[string]int
	// PausedHandlers are the handlers an operator paused whole
	// (inspect.Inspector.PauseHandler), as this instance's last discovery
	// cycle found, and those whose pause this instance has failed to read
	// for longer than two discovery intervals (it fails closed; Health's
	// reasons tell the two apart); their partitions start nothing. Nil
	// when none.
	PausedHandlers []string
	// Faults lists the partitions this instance released after permanent
	// Redis errors (while benched) and those it found without an owner for
	// longer than Engine.UnownedAfter(), sorted by kind, handler, stream.
	Faults []Fault
}

// Halted returns the owned partitions that are halted.
func (s Status) Halted() []PartitionStatus {
	var out []PartitionStatus
	for _, p := range s.Partitions {
		if p.Halted {
			out = append(out, p)
		}
	}
	return out
}

// Paused returns the owned partitions that are paused.
func (s Status) Paused() []PartitionStatus {
	var out []PartitionStatus
	for _, p := range s.Partitions {
		if p.Paused {
			out = append(out, p)
		}
	}
	return out
}

// LeaseInfo tells a handler which lease it runs under, so it can pass the
// fencing token on to an external system that checks it.
type LeaseInfo struct {
	Handler  string // Registration.Name (for a pm, its name)
	Category string // the partition's category (for a pm, its categories joined by ",")
	Key      string // the partition key (for a pm, the correlation value)
	Token    string // <owner_id>~<incarnation>:<generation> (the incarnation is random per engine)
	// Generation is larger for every later owner of the partition: each
	// acquire takes max(stored + 1, Redis time in microseconds), so it
	// keeps increasing across a Redis restart without persistence, from an
	// older snapshot, or a failover that lost writes (only the Redis
	// server's clock set back further than the time between two acquires
	// could repeat one). Pass it (or Token) to a store that must refuse a
	// stale owner's write: keep the highest generation seen per partition
	// and refuse lower ones.
	Generation int64
	// LeaseKey holds Token while the lease lasts: an effect committed in
	// Redis can be fenced with a script that first checks
	// GET(LeaseKey) == Token (keep it in the same slot: hash tag).
	LeaseKey string
}

// ClientFromContext returns the Redis client of the engine running a
// handler's message. A handler that keeps effects in Redis should write
// them through it, fenced with LeaseFromContext: with Sentinel, a client of
// the handler's own follows a failover at its own moment (up to a second
// apart from the engine's, measured), so for that while one process would
// write to two primaries, its commits refused by the new primary's lease
// while the engine still renews on the old one (docs/runtime.md,
// "Failover"). False outside an engine's handler (the InlineBroker has no
// Redis).
func ClientFromContext(ctx context.Context) (redis.UniversalClient, bool) {
	return executor.ClientFrom(ctx)
}

// LeaseFromContext returns the lease a keyed handler's or a sequential
// pm's message runs under. For a pm, Handler is the pm's name, Key the
// correlation value and Category its categories joined by ",".
func LeaseFromContext(ctx context.Context) (LeaseInfo, bool) {
	li, ok := executor.LeaseFrom(ctx)
	return LeaseInfo(li), ok
}
