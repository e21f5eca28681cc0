package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// Config is what an Executor needs from the engine; New takes it. The
// InlineBroker passes a zero Config: no telemetry, no timeout, no slots.
type Config struct {
	// Log gets the retries and stuck attempts; nil discards them.
	Log *slog.Logger
	// Telemetry records each attempt's span and duration and counts
	// retries; nil records nothing.
	Telemetry *telemetry.Telemetry
	// Owner is Options.OwnerID, the Owner of every Halt.
	Owner string
	// Timeout is Options.HandlerTimeout, an attempt's timeout unless its
	// Handler has its own; 0 or less: none.
	Timeout time.Duration
	// Retry is the engine's retry options (already defaulted), which a
	// Handler's Retry overrides field by field.
	Retry RetryPolicy
	// MaxDeliveries is Options.MaxDeliveries (0 or less: no bound).
	MaxDeliveries int
	// Concurrency is Options.Concurrency: how many attempts hold a slot
	// at once (Slots); at least 1 for Handle.
	Concurrency int
	// KnownType reports whether any registration routes or lists typ on
	// category: an entry of a known type a handler does not route is
	// another handler's, acked unread. Nil: none is.
	KnownType func(category, typ string) bool
	// OtherBuilds returns the owners of the other live builds of handler
	// that route typ on category (a rolling deploy): the entry is left to
	// them. Nil: none.
	OtherBuilds func(handler, category, typ string) []string
	// States keeps the pms' state (Options.StateStore).
	States StateStore
	// LoadApplied, when States records the entry each save applies (the
	// built-in stores), is its Load plus the last entry of stream the
	// state includes; nil for a store that does not.
	LoadApplied func(ctx context.Context, pm, correlation, stream string) (data []byte, version int64, lastApplied string, err error)
}

// StateStore is runtime.StateStore's method set, so the engine's store is
// passed as it is.
type StateStore interface {
	// Load returns the stored state and its version (nil, 0: none yet).
	Load(ctx context.Context, pm, correlation string) (data []byte, version int64, err error)
	// Save stores data as version expectVersion+1, or fails with an error
	// matching contract.ErrStateConflict.
	Save(ctx context.Context, pm, correlation string, data []byte, expectVersion int64) error
}

// RetryPolicy is runtime.RetryPolicy's copy (same fields, same order):
// runtime converts it. A zero field keeps Config.Retry's.
type RetryPolicy struct {
	MaxRetries          int           // before the entry halts; negative: none
	RetryBackoff        time.Duration // the first retry delay, doubled up to MaxBackoff
	MaxBackoff          time.Duration // caps the retry delay
	HaltedRetryInterval time.Duration // how often a halted head is retried; negative: never
}

// Handler is a registration as the executor runs it, converted from
// runtime.Registration when it is registered.
type Handler struct {
	// Name is Registration.Name.
	Name string
	// Kind is Registration.Kind's String ("handler", "process manager"),
	// for error texts.
	Kind string
	// PM is set for a process manager: an attempt loads its state, calls
	// it, and saves the state.
	PM bool
	// NewState returns a new zero pm value (PM only).
	NewState func() any
	// Routes are Registration.Routes.
	Routes []Route
	// Retry overrides Config.Retry (nil: none).
	Retry *RetryPolicy
	// Timeout overrides Config.Timeout (0: Config's; negative: none).
	Timeout time.Duration
}

// Route is runtime.Route as the executor calls it: Decode decodes with
// the engine's codec.
type Route struct {
	Category, Type string
	// Decode turns a payload into the message (generated).
	Decode func(payload []byte) (any, error)
	// Correlate reads a pm's correlation value (generated; pm only).
	Correlate func(m any) (string, error)
	// Invoke calls the handle method; state is nil but for a pm.
	Invoke func(ctx context.Context, state any, m any) error
}

// handler is a Handler with its effective retry policy and timeout.
type handler struct {
	Handler
	policy  RetryPolicy
	timeout time.Duration
}

// route returns h's route for a category and wire type.
func (h *handler) route(category, typ string) (Route, bool) {
	for _, rt := range h.Routes {
		if rt.Category == category && rt.Type == typ {
			return rt, true
		}
	}
	return Route{}, false
}

// Executor runs handlers' attempts. Its methods are safe for concurrent
// use.
type Executor struct {
	cfg   Config
	log   *slog.Logger
	slots *Slots

	mu sync.Mutex // serializes Add
	// handlers by name, replaced whole by Add: read on every entry, and
	// handlers are only added before Run.
	handlers atomic.Pointer[map[string]*handler]
	// starts is where each group starts (SetStarts); nil: none set.
	starts atomic.Pointer[map[Group]string]
}

// Group names a handler's consumer group on a category.
type Group struct{ Category, Handler string }

// SetStarts sets where each group starts: the entry id Run registered it
// at ("" or "0": the beginning). An entry before its group's start was
// published before the handler first started (StartFromNew), and Decode
// skips it. Run sets them before any worker reads.
func (x *Executor) SetStarts(starts map[Group]string) { x.starts.Store(&starts) }

// beforeStart reports whether entry id predates where handler's group
// starts on category.
func (x *Executor) beforeStart(handler, category, id string) bool {
	m := x.starts.Load()
	if m == nil {
		return false
	}
	start := (*m)[Group{Category: category, Handler: handler}]
	return start != "" && start != "0" && EntryAfter(start, id)
}

// New returns an Executor with no handlers.
func New(cfg Config) *Executor {
	x := &Executor{cfg: cfg, log: cfg.Log, slots: NewSlots(cfg.Concurrency)}
	if x.log == nil {
		x.log = slog.New(slog.DiscardHandler)
	}
	if x.cfg.KnownType == nil {
		x.cfg.KnownType = func(string, string) bool { return false }
	}
	if x.cfg.OtherBuilds == nil {
		x.cfg.OtherBuilds = func(string, string, string) []string { return nil }
	}
	x.handlers.Store(&map[string]*handler{})
	return x
}

// Add makes h runnable by name, with its effective retry policy and
// timeout fixed now; a later Add of the same name replaces it.
func (x *Executor) Add(h Handler) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := *x.handlers.Load()
	m := make(map[string]*handler, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[h.Name] = &handler{Handler: h, policy: x.policyOf(h), timeout: x.timeoutOf(h)}
	x.handlers.Store(&m)
}

// handler returns the handler added as name, or nil.
func (x *Executor) handler(name string) *handler { return (*x.handlers.Load())[name] }

// mustHandler returns the handler added as name: the engine runs only
// what it registered, so a missing one is a bug.
func (x *Executor) mustHandler(name string) *handler {
	h := x.handler(name)
	if h == nil {
		panic(fmt.Sprintf("executor: handler %q was not added", name))
	}
	return h
}

// Slots are the engine's concurrency slots, which the gates of leased
// partitions take too.
func (x *Executor) Slots() *Slots { return x.slots }

// Policy is the effective retry policy of the handler added as name: its
// own fields over Config.Retry.
func (x *Executor) Policy(name string) RetryPolicy { return x.mustHandler(name).policy }

// policyOf is h's effective retry policy.
func (x *Executor) policyOf(h Handler) RetryPolicy {
	p := x.cfg.Retry
	if r := h.Retry; r != nil {
		switch {
		case r.MaxRetries < 0:
			p.MaxRetries = 0
		case r.MaxRetries > 0:
			p.MaxRetries = r.MaxRetries
		}
		if r.RetryBackoff > 0 {
			p.RetryBackoff = r.RetryBackoff
		}
		if r.MaxBackoff > 0 {
			p.MaxBackoff = r.MaxBackoff
		}
		if r.HaltedRetryInterval != 0 {
			p.HaltedRetryInterval = r.HaltedRetryInterval
		}
	}
	return p
}

// timeoutOf is h's attempt timeout (0: none).
func (x *Executor) timeoutOf(h Handler) time.Duration {
	d := x.cfg.Timeout
	if h.Timeout != 0 {
		d = h.Timeout
	}
	return max(d, 0)
}

// Outcome is how handling one entry ended.
type Outcome int

// The outcomes of Handle.
const (
	OutDone Outcome = iota // processed: ack it
	OutHalt                // cannot be processed: leave it pending, halt
	OutLost                // the lease was lost (or the context ended): do not ack, abandon
	OutStop                // asked to stop between retries: leave it pending
	// OutSkip: not for the handler (a type it has no method for, an entry
	// published before it first started, or deleted while pending): ack
	// it as OutDone, without a handler call, counted apart.
	OutSkip
	// OutPause: an operator paused the partition or its handler before
	// an attempt started; keep the entry to run once resumed.
	OutPause
)

// Admission is a Gate's answer to an attempt.
type Admission int

// The answers of Gate.Enter.
const (
	Admitted Admission = iota // the attempt may start; the caller must Leave
	Refused                   // the context ended or the lease is lost: OutLost
	Paused                    // an operator paused the partition or its handler: OutPause
	Stopped                   // the partition is handed back before any attempt: OutStop
)

// Gate admits one entry's attempts. A leased partition's gate applies
// the fence rule (package runtime); Slots is the gate of a handler
// without a lease.
type Gate interface {
	// Enter waits until an attempt may start, or says why it may not;
	// nothing is held unless it returns Admitted.
	Enter(ctx context.Context) Admission
	// Leave ends an admitted attempt; ok: it succeeded.
	Leave(ok bool)
}

// Handle decodes en, of category, and runs the handler added as name on
// it, retrying with backoff per its retry policy. ctx is the handler's
// context (cancelled when a lease is lost); stop interrupts a retry
// backoff; g admits each attempt; halted: the entry is a halted head,
// given one attempt. A pm here is one that is not sequential: its state
// saves are optimistic. A sequential pm's entries go through the engine's
// own loop, built on Decode, Attempt and ApplyPM.
func (x *Executor) Handle(ctx context.Context, stop <-chan struct{}, g Gate, name, category string, en rdb.Entry, halted bool) (Outcome, *contract.Halt) {
	h := x.mustHandler(name)
	rt, m, skip, halt := x.decode(h, category, en)
	switch {
	case halt != nil:
		return OutHalt, halt
	case skip:
		return OutSkip, nil
	}
	var err error
	corr := ""
	if h.PM {
		if corr, err = Correlate(rt, m); err != nil {
			return OutHalt, x.Halt(name, category, en, "no correlation value", contract.Permanent(err))
		}
		ctx = WithCorrelation(ctx, corr)
	}
	policy := h.policy
	if halted {
		policy.MaxRetries = 0
	}
	backoff := policy.RetryBackoff
	for attempt := 0; ; attempt++ {
		switch g.Enter(ctx) {
		case Paused:
			return OutPause, nil
		case Stopped:
			return OutStop, nil
		case Refused:
			return OutLost, nil
		}
		err = x.attempt(ctx, h, category, en, attempt+1, func(ctx context.Context) error {
			if h.PM {
				return x.applyPMOptimistic(ctx, h, rt, corr, m)
			}
			return Invoke(ctx, rt, nil, m)
		})
		g.Leave(err == nil)
		if err == nil {
			return OutDone, nil
		}
		if ctx.Err() != nil {
			return OutLost, nil
		}
		if errors.Is(err, contract.ErrPermanent) {
			return OutHalt, x.Halt(name, category, en, "handler failed permanently", err)
		}
		if attempt >= policy.MaxRetries {
			return OutHalt, x.Halt(name, category, en, fmt.Sprintf("handler failed %d times", attempt+1), err)
		}
		x.retried(ctx, name, category)
		x.log.Warn("seqby: handler failed; retrying", "handler", name, "stream", en.Stream,
			"entry", en.ID, "attempt", attempt+1, "backoff", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return OutLost, nil
		case <-stop:
			t.Stop()
			return OutStop, nil
		}
		backoff = min(2*backoff, policy.MaxBackoff)
	}
}

// Settled counts the outcome of an entry an owner settled: handled,
// skipped or halted (a lost or stopped attempt settles nothing).
func (x *Executor) Settled(handler, category string, out Outcome) {
	t := x.cfg.Telemetry
	if t == nil {
		return
	}
	switch out {
	case OutDone:
		t.Event(context.Background(), handler, category, telemetry.OutcomeHandled)
	case OutSkip:
		t.Event(context.Background(), handler, category, telemetry.OutcomeSkipped)
	case OutHalt:
		t.Event(context.Background(), handler, category, telemetry.OutcomeFailed)
	}
}

// retried counts a failed attempt that is retried after a backoff.
func (x *Executor) retried(ctx context.Context, handler, category string) {
	if x.cfg.Telemetry != nil {
		x.cfg.Telemetry.Event(ctx, handler, category, telemetry.OutcomeRetried)
	}
}

// Halt describes en, of category, as an entry handler cannot process:
// permanent when err is (contract.Permanent).
func (x *Executor) Halt(handler, category string, en rdb.Entry, reason string, err error) *contract.Halt {
	return &contract.Halt{Handler: handler, Category: category, Stream: en.Stream, EntryID: en.ID,
		MessageType: en.Fields[rdb.FieldType], MessageID: en.Fields[rdb.FieldID], Reason: reason, Err: err,
		Permanent: errors.Is(err, contract.ErrPermanent), Owner: x.cfg.Owner, At: time.Now()}
}

// Slots bound how many handler attempts run at once in an engine
// (Options.Concurrency). A leased partition's gate takes a slot for each
// attempt (Acquire, Release), after its lease checks; Slots itself is the
// Gate of a handler without a lease: a slot and a live context.
type Slots struct{ c chan struct{} }

// NewSlots returns n slots. Below 1 none can be taken: the InlineBroker's
// executor, which runs no gate, has none.
func NewSlots(n int) *Slots { return &Slots{c: make(chan struct{}, max(n, 0))} }

// Acquire waits for a slot; false, holding nothing, when ctx ended first.
// A ctx that ended as the slot came (a select picks either) is refused
// too: an attempt never starts with its context already done.
func (s *Slots) Acquire(ctx context.Context) bool {
	select {
	case s.c <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	if ctx.Err() != nil {
		s.Release()
		return false
	}
	return true
}

// Release frees a slot Acquire took.
func (s *Slots) Release() { <-s.c }

// Enter takes a slot for an attempt of a handler without a lease
// (Gate): Admitted, or Refused once ctx ended.
func (s *Slots) Enter(ctx context.Context) Admission {
	if !s.Acquire(ctx) {
		return Refused
	}
	return Admitted
}

// Leave frees the attempt's slot (Gate).
func (s *Slots) Leave(bool) { s.Release() }
