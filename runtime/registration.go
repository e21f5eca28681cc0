package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/seqby/seqby/runtime/internal/executor"
)

// SupportPackageIsVersion2 is referenced by code seqgen writes. If a newer
// seqgen needs a newer runtime, its output names SupportPackageIsVersion3 and
// stops compiling against this runtime instead of misbehaving at run time;
// code from an older seqgen names SupportPackageIsVersion1 and fails the
// same way: run the seqgen of this module's version again. Version 2 routes
// decoded messages as any (see Route.Decode), for types declared by a
// marked alias.
const SupportPackageIsVersion2 = true

// Kind says what a Registration registers.
type Kind uint8

// The kinds of registration seqgen writes.
const (
	EventHandler   Kind = iota + 1 // //seqby:handler
	CommandHandler                 // //seqby:commandhandler
	ProcessManager                 // //seqby:pm
)

// String names the kind in errors and logs ("handler", "command handler",
// "process manager").
func (k Kind) String() string {
	switch k {
	case EventHandler:
		return "handler"
	case CommandHandler:
		return "command handler"
	case ProcessManager:
		return "process manager"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Registration is what seqgen writes for one handler, command handler or
// process manager (the SeqbyRegistration method), and what an engine or the
// inline broker consumes. Hand-written values are allowed; the engine checks
// them again at registration.
type Registration struct {
	// Name identifies the handler: its //seqby:name marker's value, else
	// "import/path.Type". It names the consumer group, so a new name (a
	// renamed or moved type without //seqby:name) starts a new group,
	// which reads from Options.NewHandlerStart. It may not contain '@',
	// which is to name a lease generation's group (Name@generation).
	Name string
	// Kind of handler.
	Kind Kind
	// Key is the field a keyed handler or command handler is sequential by
	// (//seqby:key=FIELD), "" when it is not keyed. Always "" for a pm.
	Key string
	// Sequential is set for a keyed handler and for a pm marked
	// //seqby:sequential: its messages are processed one at a time per key
	// (per correlation value for a pm).
	Sequential bool
	// Routes lists the handled message types, sorted by category then type.
	Routes []Route
	// NewState returns a pointer to a new zero pm value (pm only). The
	// engine loads the pm's state into it before a handle method and saves
	// it after.
	NewState func() any
	// Catalog lists, for each category the registration reads, the wire
	// names of every message type seqgen found in that category, handled
	// or not. A category's stream carries all of them, so an engine acks
	// an entry of a listed type this registration does not route (another
	// handler's message) and halts only on a type listed nowhere (one this
	// build does not know, such as one published by a newer version).
	// Hand-written registrations may leave it nil: then only types some
	// registration routes count as known.
	Catalog map[string][]string
	// Retry overrides the engine's retry options for this handler (nil:
	// the engine's). Set it on the registration seqgen wrote before
	// registering it: the engine reads it when the handler is registered.
	Retry *RetryPolicy
	// Timeout overrides the engine's HandlerTimeout for this handler (0:
	// the engine's; negative: none).
	Timeout time.Duration
	// AckBatch, above 1, puts a keyed handler in the batched mode: a
	// partition runs up to AckBatch entries before their acks are
	// answered. The entries read ahead (a read takes AckBatch when that is
	// more than Options.ReadAhead) run one after another, and their acks
	// go together, fenced, with the next read, or in one call once
	// AckBatch are unanswered or the last call that confirmed the lease
	// was sent more than Options.VerifyBound ago. Entries of a key still
	// run one at a time and in publish order, each attempt under a lease
	// confirmed within the verify bound; what changes is the re-run bound:
	// after a crash or a stall up to AckBatch entries of a partition (the
	// one in flight and those before it not acked yet), not one, run again
	// on its next owner, in order, never reordered. Worth it for hot keys
	// with idempotent handlers: one round trip per batch instead of one per
	// entry. 0 or 1: the default promise. Keyed handlers only (a process
	// manager acks each entry before the next); at most 1000.
	AckBatch int
}

// maxAckBatch bounds Registration.AckBatch: the unanswered entries wait
// in memory, and their acks go in one call.
const maxAckBatch = 1000

// Route is one handled message type of a Registration.
type Route struct {
	// Category is the message type's stream category.
	Category string
	// Type is the message type's wire name (its Go type name), written in
	// each stream entry and used to pick the Route when decoding.
	Type string
	// PartitionField is the JSON name of the field that partitions
	// Category ("" when the category is not partitioned). seqgen writes the
	// same value on every Route of a category, so an engine can compare it
	// across registrations to enforce one key per category.
	PartitionField string
	// CorrelateField is the JSON name of the pm's //seqby:correlate field
	// on this message type (pm only).
	CorrelateField string
	// Decode turns a payload into the message type: a value of it, or a
	// pointer to one for a type that must not be copied. It is any, not
	// Message, because a type declared by a marked alias has no methods of
	// seqby's (see Foreign).
	Decode func(c Codec, payload []byte) (any, error)
	// PartitionKey reads the partition key of a decoded message (nil when
	// the category is not partitioned).
	PartitionKey func(m any) (string, error)
	// Correlate reads the correlation value of a decoded message (pm only).
	Correlate func(m any) (string, error)
	// Invoke calls the handle method. state is the value NewState made
	// (pm only; nil otherwise). m must be what Decode returned.
	Invoke func(ctx context.Context, state any, m any) error
}

// WithCorrelation returns ctx carrying a pm's correlation value, as the
// engine and the inline broker pass it to a handle method. Use it to call
// a pm's handle method directly in a unit test.
func WithCorrelation(ctx context.Context, value string) context.Context {
	return executor.WithCorrelation(ctx, value)
}

// Correlation returns the correlation value of the pm instance being
// handled, as the engine and inline broker put it in a handle method's
// context.
func Correlation(ctx context.Context) (string, bool) {
	return executor.CorrelationFrom(ctx)
}
