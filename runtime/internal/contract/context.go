package contract

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The context keys of a handler's context. Each is a type of its own, so
// no other package's key can collide with it; the accessors are the only
// way to set or read them, for runtime and the engine's packages alike.
type (
	leaseKey       struct{}
	messageKey     struct{}
	correlationKey struct{}
	clientKey      struct{}
	appliedKey     struct{}
)

// LeaseInfo is runtime.LeaseInfo's copy, with the same fields in the same
// order: runtime converts it.
type LeaseInfo struct {
	Handler, Category, Key, Token string
	Generation                    int64
	LeaseKey                      string
}

// WithLease returns ctx carrying the lease an attempt runs under.
func WithLease(ctx context.Context, li LeaseInfo) context.Context {
	return context.WithValue(ctx, leaseKey{}, li)
}

// LeaseFrom returns the lease in ctx; false when it carries none.
func LeaseFrom(ctx context.Context) (LeaseInfo, bool) {
	li, ok := ctx.Value(leaseKey{}).(LeaseInfo)
	return li, ok
}

// MessageInfo is runtime.MessageInfo's copy. Its Replay points to this
// package's ReplayInfo, so runtime copies it field by field, converting
// the pointer.
type MessageInfo struct {
	Stream, EntryID string
	MessageID       string
	PublishedAt     time.Time
	Attempt         int
	Deliveries      int64
	Generation      int64
	Replay          *ReplayInfo
}

// ReplayInfo is runtime.ReplayInfo's copy.
type ReplayInfo struct {
	OriginalStream, OriginalEntryID string
	DLQ, DLQEntryID                 string
	Handler                         string
}

// WithMessage returns ctx carrying the message an attempt runs on.
func WithMessage(ctx context.Context, mi MessageInfo) context.Context {
	return context.WithValue(ctx, messageKey{}, mi)
}

// MessageFrom returns the message in ctx; false outside an attempt.
func MessageFrom(ctx context.Context) (MessageInfo, bool) {
	mi, ok := ctx.Value(messageKey{}).(MessageInfo)
	return mi, ok
}

// WithCorrelation returns ctx carrying a pm's correlation value.
func WithCorrelation(ctx context.Context, value string) context.Context {
	return context.WithValue(ctx, correlationKey{}, value)
}

// CorrelationFrom returns the correlation value in ctx.
func CorrelationFrom(ctx context.Context) (string, bool) {
	v, ok := ctx.Value(correlationKey{}).(string)
	return v, ok
}

// WithClient returns ctx carrying the engine's Redis client, for handlers
// that write their effects through it.
func WithClient(ctx context.Context, c redis.UniversalClient) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// ClientFrom returns the client in ctx; false outside an engine.
func ClientFrom(ctx context.Context) (redis.UniversalClient, bool) {
	c, ok := ctx.Value(clientKey{}).(redis.UniversalClient)
	return c, ok
}

// appliedMark names the entry a pm state save applies.
type appliedMark struct{ stream, id string }

// WithApplied returns ctx telling a state store's Save which entry the
// saved state includes: stream entry id of stream. A store that records
// it with the state (the built-in ones) lets a redelivered entry be
// recognised as already applied.
func WithApplied(ctx context.Context, stream, id string) context.Context {
	return context.WithValue(ctx, appliedKey{}, appliedMark{stream, id})
}

// AppliedFrom returns the entry WithApplied put in ctx.
func AppliedFrom(ctx context.Context) (stream, id string, ok bool) {
	a, ok := ctx.Value(appliedKey{}).(appliedMark)
	return a.stream, a.id, ok
}

// EntryAfter reports whether stream entry id a comes after b ("ms-seq").
func EntryAfter(a, b string) bool {
	ams, aseq, _ := strings.Cut(a, "-")
	bms, bseq, _ := strings.Cut(b, "-")
	am, _ := strconv.ParseUint(ams, 10, 64)
	bm, _ := strconv.ParseUint(bms, 10, 64)
	if am != bm {
		return am > bm
	}
	as, _ := strconv.ParseUint(aseq, 10, 64)
	bs, _ := strconv.ParseUint(bseq, 10, 64)
	return as > bs
}
