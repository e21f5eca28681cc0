package lease

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Ident names what a Held leases, for its worker's handler context and
// for the log lines it writes.
type Ident struct {
	// Handler is the handler's (or pm's) Registration.Name.
	Handler string
	// Key is the partition key, or a pm's correlation value.
	Key string
	// Cats are the categories of the lease's partition streams
	// (rdb.LeaseRef.Wake), in order: a keyed partition's one, a pm's
	// every category.
	Cats []string
	// Stream is the stream log lines name: the partition's first lane.
	Stream string
}

// Hooks are what a Held asks of its worker. Nil hooks do nothing.
type Hooks struct {
	// Halted reports whether the worker is halted on its head: a halted
	// partition's lease gone from Redis may be an operator's resolve,
	// which the worker tells apart as it ends (TakeLossCause). Called
	// holding the Held's lock.
	Halted func() bool
	// Await holds an attempt until the worker's writes are on the
	// strict mode's replicas; a gate calls it before each attempt in
	// that mode.
	Await func(ctx context.Context) error
	// Unpaused notes that a confirmation found the partition running.
	Unpaused func()
	// OnRefused gets a renewal refused with a permanent error once
	// Renewer's PermanentErrors in a row were: the worker hands over
	// and benches the partition.
	OnRefused func(err error)
}

// Held is one lease a worker runs under: its context, carrying the lease
// for the handler and cancelled when the lease is lost, and its local
// deadline, which a renewal moves and past which no attempt starts.
type Held struct {
	ls    *Leases
	lease rdb.Lease
	id    Ident
	hooks Hooks

	ctx    context.Context // cancelled when the lease is lost
	cancel context.CancelCauseFunc
	timer  *time.Timer // fires at last renew + TTL - margin
	// deadlineAt is the lease's local deadline, as nanoseconds since the
	// engine's epoch (so it is read on the monotonic clock): the last
	// renew sent + LeaseTTL - LeaseMargin, when the timer fires. No
	// attempt starts after it (the fence rule).
	deadlineAt atomic.Int64

	// ConfirmedAt is when the last fenced call of the worker that
	// succeeded was sent: what a batched entry that runs without an ack
	// of its own counts from (the fence rule). Only the worker's own
	// goroutine touches it.
	ConfirmedAt time.Time
	// DurableAt, in the strict mode (Options.ReplicaAcks), is when the
	// last replica barrier that confirmed the partition's writes was
	// sent, or its acquire (package replicas). Only the worker's own
	// goroutine touches it.
	DurableAt time.Time

	// marked: an attempt of the halted head is marked in Redis (the
	// fence rule), so the Renewer renews the mark with the lease.
	marked atomic.Bool
	// renewErrs counts permanent errors renewing the lease since the last
	// renew that succeeded; only the Renewer touches it.
	renewErrs int

	mu     sync.Mutex
	lostAt bool
	// gone: Redis said the lease is no longer this token (a fenced script
	// or a renew that found it gone), so the worker need not release it.
	gone bool
	// done: the worker has begun to end (End); a heartbeat racing it
	// neither re-arms the stopped timer nor reports the lease it is
	// releasing as lost.
	done bool
	// lossCause is a loss of a halted partition's lease, reported by the
	// worker as it ends: an operator's resolve deletes the lease, and
	// that is a resolution, not a loss. Guarded by mu.
	lossCause error
	// named says, per stream of lease.Ref.Wake, whether its wake hash is
	// known to name this owner. Guarded by mu.
	named []bool
}

// Hold wraps an acquired lease; acquiredAt is when the acquire was sent,
// the earliest the Redis TTL can have started. Its context, derived from
// base, carries the lease for the handler (LeaseFromContext), and its
// timer counts the lease lost at acquiredAt + TTL - margin.
func (ls *Leases) Hold(base context.Context, id Ident, l rdb.Lease, acquiredAt time.Time, hooks Hooks) *Held {
	h := &Held{ls: ls, lease: l, id: id, hooks: hooks}
	h.initNamed()
	info := executor.LeaseInfo{Handler: id.Handler, Category: strings.Join(id.Cats, ","), Key: id.Key,
		Token: l.Token(), Generation: l.Generation, LeaseKey: l.Ref.Key}
	h.ctx, h.cancel = context.WithCancelCause(executor.WithLease(base, info))
	h.DurableAt = acquiredAt
	deadline := acquiredAt.Add(ls.cfg.LeaseTTL - ls.cfg.LeaseMargin)
	h.deadlineAt.Store(int64(deadline.Sub(ls.epoch)))
	h.timer = time.AfterFunc(time.Until(deadline), func() {
		h.Lost(errors.New("lease not renewed before its deadline"))
	})
	return h
}

// Lease is the lease held.
func (h *Held) Lease() rdb.Lease { return h.lease }

// Key is the partition key, or a pm's correlation value.
func (h *Held) Key() string { return h.id.Key }

// Context is cancelled when the lease is lost, or when the worker ends
// (Cancel); it carries the lease for the handler.
func (h *Held) Context() context.Context { return h.ctx }

// Cancel ends h's context with cause, as the worker ends.
func (h *Held) Cancel(cause error) { h.cancel(cause) }

// Renewed moves the loss deadline after a renew sent at sentAt succeeded.
// h.mu orders it with End, so a renew answered after End stopped the
// timer never re-arms it.
func (h *Held) Renewed(sentAt time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done && h.ctx.Err() == nil {
		deadline := sentAt.Add(h.ls.cfg.LeaseTTL - h.ls.cfg.LeaseMargin)
		if d := int64(deadline.Sub(h.ls.epoch)); d > h.deadlineAt.Load() {
			h.deadlineAt.Store(d)
		}
		h.timer.Reset(time.Until(deadline))
	}
}

// deadline is the lease's local deadline: no attempt starts after it.
func (h *Held) deadline() time.Time {
	return h.ls.epoch.Add(time.Duration(h.deadlineAt.Load()))
}

// Lost cancels the handler's context: the lease is gone or about to be.
// After End it is a heartbeat racing a normal release, not a loss worth
// a warning.
func (h *Held) Lost(cause error) {
	h.mu.Lock()
	// After the worker released a cold partition (SetGone), a heartbeat
	// finding its lease missing is no loss either.
	first := !h.lostAt && !h.done && !h.gone
	h.lostAt = true
	gone := errors.Is(cause, rdb.ErrFenced) || errors.Is(cause, rdb.ErrLeaseLost)
	if gone {
		h.gone = true
	}
	// A halted partition's lease gone from Redis may be an operator's
	// resolve: the worker tells which as it ends, off the heartbeat.
	deferred := first && gone && h.hooks.Halted != nil && h.hooks.Halted()
	if deferred {
		h.lossCause = cause
	}
	h.mu.Unlock()
	if first && !deferred {
		h.ReportLoss(cause)
	}
	if deferred {
		h.ls.cfg.Log.Debug("seqby: a halted partition's lease is gone; an operator's resolve, or a loss, is reported as the partition ends", "handler", h.id.Handler, "stream", h.id.Stream, "cause", cause)
	}
	h.cancel(errors.Join(rdb.ErrLeaseLost, cause))
}

// ReportLoss counts and logs the loss of h's lease.
func (h *Held) ReportLoss(cause error) {
	cfg := &h.ls.cfg
	cfg.Telemetry.LeaseLost(h.id.Handler)
	if errors.Is(cause, rdb.ErrFenced) {
		cfg.Telemetry.LeaseFenced(h.id.Handler)
	}
	level := slog.LevelWarn
	if b := cfg.Replicas; b != nil && b.ShortFor(b.SlotOf(h.lease.Ref.Key), cfg.LeaseTTL) {
		// The strict mode waits for replicas, and its renewals went
		// unconfirmed: every partition of the slot loses its lease each
		// LeaseTTL until they are back, which the barrier's own warning
		// says once.
		level = slog.LevelDebug
	}
	cfg.Log.Log(context.Background(), level, "seqby: lease lost; abandoning the partition", "handler", h.id.Handler, "stream", h.id.Stream, "token", h.lease.Token(), "cause", cause)
}

// TakeLossCause returns the loss Lost deferred for a halted partition
// (nil: none), once: the worker reports it, or the operator's resolve it
// was, as it ends.
func (h *Held) TakeLossCause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	cause := h.lossCause
	h.lossCause = nil
	return cause
}

// End marks h done as its worker ends, stopping the deadline timer, and
// reports whether Redis already said the lease is gone (then it need not
// be released).
func (h *Held) End() (gone bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	h.timer.Stop()
	return h.gone
}

// Gone reports whether Redis said the lease is no longer this token.
func (h *Held) Gone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gone
}

// SetGone records that the worker let the lease go itself (a cold
// release deleted it): a heartbeat finding it missing is no loss.
func (h *Held) SetGone() {
	h.mu.Lock()
	h.gone = true
	h.mu.Unlock()
}

// confirm checks h's lease in Redis before an attempt, in the Batcher's
// next round, or marking the attempt when head (begin_attempt.lua, a
// call of its own: a halted head's attempts are rare); a lost lease ends
// the partition.
func (h *Held) confirm(ctx context.Context, head bool) error {
	var err error
	if head {
		h.marked.Store(true)
		err = h.lease.BeginAttempt(ctx, h.ls.cfg.Client, h.ls.cfg.LeaseTTL)
	} else {
		err = h.ls.cfg.Batch.Verify(ctx, h.lease)
	}
	if errors.Is(err, rdb.ErrFenced) {
		h.Lost(err)
	}
	return err
}

// EndAttempt removes h's attempt mark, if it set one. A failure leaves it
// until its expiry: the renewer extends only the marks of attempts still
// running, so it refuses an operator's resolve a lease TTL at most.
func (h *Held) EndAttempt() {
	if !h.marked.Swap(false) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), h.ls.cfg.HeartbeatInterval)
	defer cancel()
	if err := h.lease.EndAttempt(ctx, h.ls.cfg.Client); err != nil {
		h.ls.cfg.Log.Debug("seqby: removing an attempt mark failed; it expires within a lease TTL", "handler", h.id.Handler, "stream", h.id.Stream, "err", err)
	}
}

// await is the worker's Await hook (nil: nothing to wait for).
func (h *Held) await(ctx context.Context) error {
	if h.hooks.Await == nil {
		return nil
	}
	return h.hooks.Await(ctx)
}

// unpaused calls the worker's Unpaused hook.
func (h *Held) unpaused() {
	if h.hooks.Unpaused != nil {
		h.hooks.Unpaused()
	}
}

// A publish wakes the owners named in its partition's wake hash
// (rdb.WakeKey), and an acquire names its owner only where the stream
// exists: a sequential pm takes a correlation value before some of its
// categories have a stream for it. Once such a stream exists and another
// handler's owner is named in its hash, a publish to it signals that owner
// alone, and the pm would find the entry at its safety-net re-read. So
// each Held remembers, per stream of its lease (rdb.LeaseRef.Wake),
// whether the hash is known to name it (named), and:
//   - at its worker's first read of an entry of a stream not known named,
//     it names itself there (rdb.Lease.Name) before the entry is handled
//     (NameIf), so a publish after that wakes it;
//   - a renewal that finds the owner named where it was not known named
//     (Renewer: the stream appeared, and the renewal named it) tells it
//     too.
// Either way the worker then wakes once (wake.Waiter.Poke): a publish
// between the stream's creation and the naming may have signalled the
// other owners only, and a read that ended before the naming may have
// missed it.

// initNamed sets what h knows named from its lease's acquire.
func (h *Held) initNamed() {
	h.named = make([]bool, len(h.lease.Ref.Wake))
	copy(h.named, h.lease.Named)
}

// wakeCategory is the category of stream j of h's lease.
func (h *Held) wakeCategory(j int) string { return h.id.Cats[j] }

// NameIf names the owner in the wake hash of en's stream when that is a
// partition stream of the lease the owner does not know names it. A
// failure is logged and left to the next entry of the stream, or to the
// next renewal; a fenced one ends the partition.
func (h *Held) NameIf(en rdb.Entry) {
	j := slices.Index(h.lease.Ref.Wake, en.Stream)
	if j < 0 {
		return // a backfill lane: its publishes read its partition stream's hash
	}
	h.mu.Lock()
	known := h.named[j]
	h.mu.Unlock()
	if known {
		return
	}
	named, err := h.lease.Name(h.ctx, h.ls.cfg.Client, []string{en.Stream})
	if err != nil {
		if errors.Is(err, rdb.ErrFenced) {
			h.Lost(err)
			return
		}
		h.ls.cfg.Log.Debug("seqby: naming the owner in a partition's wake hash failed; its next entry or renewal names it",
			"handler", h.id.Handler, "stream", en.Stream, "err", err)
		return
	}
	h.knowNamed([]int{j}, named)
}

// knowNamed records that streams js of h's lease are (named[i]) or are
// not named in their wake hashes, as a call that named the owner where
// each exists replied, and wakes the worker once for each stream newly
// named.
func (h *Held) knowNamed(js []int, named []bool) {
	var pokes []string
	h.mu.Lock()
	for i, j := range js {
		if named[i] && !h.named[j] {
			pokes = append(pokes, h.wakeCategory(j))
		}
		h.named[j] = named[i]
	}
	h.mu.Unlock()
	for _, cat := range pokes {
		h.ls.cfg.Wake.Poke(cat, h.id.Key)
	}
}

// renewedNamed is knowNamed for a renewal's reply on every stream of h's
// lease (nil: not known).
func (h *Held) renewedNamed(named []bool) {
	if len(named) != len(h.lease.Ref.Wake) {
		return
	}
	js := make([]int, len(named))
	for j := range js {
		js[j] = j
	}
	h.knowNamed(js, named)
}
