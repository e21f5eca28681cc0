package executor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// stuckGrace bounds how long past its timeout a body may take to return
// before it is reported as ignoring its context: the timeout itself, at
// most this.
const stuckGrace = 5 * time.Second

// Attempt runs attempt n (from 1) of the handler added as name on en, of
// category: body gets ctx with en's MessageInfo, under the handler's
// timeout, with its span and its duration measured. A name never added
// runs without a timeout (the InlineBroker's attempts).
func (x *Executor) Attempt(ctx context.Context, name, category string, en rdb.Entry, n int, body func(context.Context) error) error {
	h := x.handler(name)
	if h == nil {
		h = &handler{Handler: Handler{Name: name}}
	}
	return x.attempt(ctx, h, category, en, n, body)
}

// attempt is Attempt for h.
func (x *Executor) attempt(ctx context.Context, h *handler, category string, en rdb.Entry, n int, body func(context.Context) error) (err error) {
	ctx = withMessage(ctx, en, n)
	if t := x.cfg.Telemetry; t != nil {
		var end func(error)
		ctx, end = t.StartAttempt(ctx, h.Name, category, attemptKey(ctx), en, n)
		defer func() { end(err) }()
	}
	d := h.timeout
	if d == 0 {
		return body(ctx)
	}
	actx, cancel := context.WithTimeoutCause(ctx, d, contract.ErrHandlerTimeout)
	defer cancel()
	start := time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() { // ends with the attempt
		t := time.NewTimer(d + min(d, stuckGrace))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				x.log.Error("seqby: a handler attempt is still running past its timeout and ignores its context; it holds its partition until it returns",
					"handler", h.Name, "stream", en.Stream, "entry", en.ID, "running_for", time.Since(start).Round(time.Millisecond), "timeout", d)
				t.Reset(d)
			}
		}
	}()
	err = body(actx)
	// A body that returned nil succeeded, however late: its effect is
	// done, and running it again would only repeat it.
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), contract.ErrHandlerTimeout) {
		err = fmt.Errorf("%w after %v: %w", contract.ErrHandlerTimeout, d, err)
	}
	return err
}

// attemptKey is the key an attempt's span names: its partition's, or a
// pm's correlation value when the pm is not sequential.
func attemptKey(ctx context.Context) string {
	if li, ok := LeaseFrom(ctx); ok {
		return li.Key
	} else if corr, ok := CorrelationFrom(ctx); ok {
		return corr
	}
	return ""
}

// withMessage gives an attempt's context its MessageInfo: en's, with the
// generation of the lease ctx carries.
func withMessage(ctx context.Context, en rdb.Entry, attempt int) context.Context {
	mi := MessageInfo{Stream: en.Stream, EntryID: en.ID, Attempt: attempt, Deliveries: en.Deliveries}
	if en.Fields != nil {
		mi.MessageID = en.Fields[rdb.FieldID]
		mi.PublishedAt, _ = time.Parse(time.RFC3339Nano, en.Fields[rdb.FieldPublishedAt])
		if r, ok := rdb.ParseReplayed(en.Fields); ok {
			mi.Replay = &ReplayInfo{OriginalStream: r.Stream, OriginalEntryID: r.Of, DLQ: r.DLQ, DLQEntryID: r.DLQID, Handler: r.Handler}
		}
	}
	if li, ok := LeaseFrom(ctx); ok {
		mi.Generation = li.Generation
	}
	return WithMessage(ctx, mi)
}

// OverDelivered is the halt of a head read more than MaxDeliveries times,
// or nil.
func (x *Executor) OverDelivered(name, category string, en rdb.Entry) *contract.Halt {
	if x.cfg.MaxDeliveries <= 0 || en.Deliveries <= int64(x.cfg.MaxDeliveries) {
		return nil
	}
	h := x.Halt(name, category, en, "delivered too many times",
		fmt.Errorf("the entry was delivered %d times (MaxDeliveries %d): the processes that handled it may have died on it; inspect it (seqbyctl inspect) before skipping it or moving it to the dead-letter stream",
			en.Deliveries, x.cfg.MaxDeliveries))
	h.Permanent = true
	return h
}

// Decode finds the route of en, of category, for the handler added as
// name, and decodes its payload. skip: the entry was deleted while
// pending, published before the handler's group started, or it is
// another handler's message type; ack it and move on. A non-nil Halt: the
// entry cannot be processed (a type this build does not know, or an
// undecodable payload: permanent), or it is not this build's to run: its
// type is not routed here but another live build of the handler routes
// it (Config.OtherBuilds; not permanent).
func (x *Executor) Decode(name, category string, en rdb.Entry) (rt Route, m any, skip bool, h *contract.Halt) {
	return x.decode(x.mustHandler(name), category, en)
}

// decode is Decode for h.
func (x *Executor) decode(h *handler, category string, en rdb.Entry) (rt Route, m any, skip bool, halt *contract.Halt) {
	if en.Fields == nil {
		x.log.Warn("seqby: pending entry was deleted from the stream; acking it", "stream", en.Stream, "entry", en.ID, "handler", h.Name)
		return rt, nil, true, nil
	}
	if x.beforeStart(h.Name, category, en.ID) {
		return rt, nil, true, nil // published before this handler first started
	}
	typ := en.Fields[rdb.FieldType]
	rt, ok := h.route(category, typ)
	if !ok {
		if halt := x.leftForAnotherBuild(h, category, en, typ); halt != nil {
			return rt, nil, false, halt
		}
	}
	if !ok && x.cfg.KnownType(category, typ) {
		return rt, nil, true, nil // another handler's message type
	}
	if !ok {
		halt := x.Halt(h.Name, category, en, "unknown message type",
			fmt.Errorf("%s %s has no route for type %q on %s, and no registration lists it: deploy a build that knows it, or skip it with seqbyctl", h.Kind, h.Name, typ, category))
		halt.Permanent = true
		return rt, nil, false, halt
	}
	m, err := safeDecode(rt, []byte(en.Fields[rdb.FieldPayload]))
	if err != nil {
		halt := x.Halt(h.Name, category, en, "undecodable payload", err)
		halt.Permanent = true
		return rt, nil, false, halt
	}
	return rt, m, false, nil
}

// leftForAnotherBuild is the halt of an entry whose type h does not route
// on category but another live build of it does (nil otherwise): not
// permanent, so a keyed partition retries it every HaltedRetryInterval
// (and goes on by its own routes once no live build routes it), and the
// other build runs it once it takes the partition over.
func (x *Executor) leftForAnotherBuild(h *handler, category string, en rdb.Entry, typ string) *contract.Halt {
	owners := x.cfg.OtherBuilds(h.Name, category, typ)
	if len(owners) == 0 {
		return nil
	}
	sort.Strings(owners)
	return x.Halt(h.Name, category, en, "type routed by another build of this handler (a rolling deploy)",
		fmt.Errorf("%s %s has no route for type %q on %s in this build, but another build of it, live on %s, routes it: the entry waits for that build, which runs it once it owns the partition; finish the deploy or the rollback, and do not skip the entry: %w",
			h.Kind, h.Name, typ, category, strings.Join(owners, ", "), contract.ErrRoutedByAnotherBuild))
}

// safeDecode runs generated Decode, turning a panic into an error.
func safeDecode(rt Route, payload []byte) (m any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decode panicked: %v", p)
		}
	}()
	m, err = rt.Decode(payload)
	if err == nil && m == nil {
		err = fmt.Errorf("decode of %s returned no message", rt.Type)
	}
	return m, err
}

// Invoke calls rt's handle method on m (state: a pm's, else nil), turning
// a panic into an error matching contract.ErrHandlerPanic: nothing a
// message contains may crash an instance.
func Invoke(ctx context.Context, rt Route, state any, m any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", contract.ErrHandlerPanic, p)
		}
	}()
	return rt.Invoke(ctx, state, m)
}

// Correlate runs rt's generated Correlate on m, turning a panic into an
// error.
func Correlate(rt Route, m any) (v string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("correlate panicked: %v", p)
		}
	}()
	if rt.Correlate == nil {
		return "", fmt.Errorf("route %s/%s has no Correlate; regenerate with seqgen", rt.Category, rt.Type)
	}
	return rt.Correlate(m)
}

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
