package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// Handler is what a worker knows of its handler's registration.
type Handler struct {
	Name     string // Registration.Name
	AckBatch int    // Registration.AckBatch
}

// Unit is what a worker leases: a keyed handler's partition, or a
// sequential pm's correlation value, which covers a stream per category.
type Unit struct {
	ID       string // PartitionID or PMPartitionID: the key of the Set
	Handler  string // Registration.Name
	AckBatch int    // Registration.AckBatch
	Key      string // the partition key, or a pm's correlation value
	// Cats are the unit's categories: a keyed partition's one, or the
	// pm's; the lease's wake streams are their partition streams.
	Cats []string
	// Lanes are the streams read: the primary streams (Primaries of
	// them), then their backfill lanes; LaneCats the category of each.
	Lanes     []string
	LaneCats  []string
	Primaries int
	// PM: a pm's correlation value, named so in halt records.
	PM bool
}

// PartitionID is the id of group's partition stream.
func PartitionID(group, stream string) string { return group + "\x00" + stream }

// PMPartitionID is the id of pm's correlation value; it cannot collide
// with PartitionID's: a stream name never starts with NUL.
func PMPartitionID(pm, correlation string) string { return pm + "\x00\x00" + correlation }

// Worker is one owned partition of a keyed handler or one correlation
// value of a sequential pm: a lease and the lanes read under it, one
// entry at a time, through its reader.
type Worker struct {
	set    *Set
	unit   Unit
	held   *lease.Held
	reader reader
	hand   handover
	// onFinish is called once finish is done: the worker group's Done,
	// counted for the partition, not for one of its goroutines.
	onFinish func()

	mu   sync.Mutex
	halt *contract.Halt
	// alertedAt is when the halt was last reported (realert).
	alertedAt time.Time
	// head is the halted head, retried from memory: reading it again
	// would count one more delivery (MaxDeliveries counts owners). Only
	// the worker's own goroutine touches it.
	head *rdb.Entry
	// prior is a halt record found at claim whose head is still pending;
	// it is removed once this owner acks that head. Only the worker's own
	// goroutine touches it.
	prior *priorHalt
	// stopped is the entry whose retries a handover interrupted: not in
	// flight, so its delivery is given back at release. Only the worker's
	// own goroutine touches it.
	stopped *rdb.Entry

	// r is what the worker read and has not settled. Only the worker's
	// own goroutine touches it.
	r reads
	// trims counts acks since the lanes were last trimmed.
	trims Trims
	// redisErrs counts Redis errors since the last success.
	redisErrs redisErrs
	// active is when the worker last had work (its claim, or its last
	// entry): once idle for ReapAfter it asks Redis whether the partition
	// is cold. Only the worker's own goroutine touches it.
	active time.Time
	// pause says whether an operator's pause stopped the worker.
	pause pauseFlags
	// lag is what the metrics' gauges see of the worker's work: the
	// oldest entry read and not handled, how many were read, and whether
	// the last read was full (more wait in Redis). Set by observeWork.
	lag telemetry.Lag
}

// Keyed returns the worker of an acquired lease l on h's partition key
// of category; acquiredAt is when the acquire was sent, the earliest the
// Redis TTL can have started. It is not in the set yet (Add).
func (s *Set) Keyed(base context.Context, h Handler, category, key string, l rdb.Lease, acquiredAt time.Time) *Worker {
	stream := rdb.PartitionStream(category, key)
	u := Unit{ID: PartitionID(h.Name, stream), Handler: h.Name, AckBatch: h.AckBatch, Key: key, Cats: []string{category},
		Lanes:     []string{stream, rdb.BackfillStream(category, key, s.cfg.BackfillSuffix)},
		LaneCats:  []string{category, category},
		Primaries: 1}
	return s.newWorker(base, u, keyed{}, l, acquiredAt)
}

// PM returns the worker of an acquired lease l on pm h's correlation
// value, on each of its categories cats (see Keyed).
func (s *Set) PM(base context.Context, h Handler, cats []string, correlation string, l rdb.Lease, acquiredAt time.Time) *Worker {
	u := Unit{ID: PMPartitionID(h.Name, correlation), Handler: h.Name, AckBatch: h.AckBatch, Key: correlation, Cats: cats,
		Primaries: len(cats), PM: true}
	for _, c := range cats {
		u.Lanes = append(u.Lanes, rdb.PartitionStream(c, correlation))
		u.LaneCats = append(u.LaneCats, c)
	}
	for _, c := range cats {
		u.Lanes = append(u.Lanes, rdb.BackfillStream(c, correlation, s.cfg.BackfillSuffix))
		u.LaneCats = append(u.LaneCats, c)
	}
	return s.newWorker(base, u, pmReader{}, l, acquiredAt)
}

// newWorker wraps the lease l of u, read by r.
func (s *Set) newWorker(base context.Context, u Unit, r reader, l rdb.Lease, acquiredAt time.Time) *Worker {
	w := &Worker{set: s, unit: u, reader: r, hand: handover{release: make(chan struct{})}, active: time.Now()}
	w.held = s.cfg.Leases.Hold(base, lease.Ident{Handler: u.Handler, Key: u.Key, Cats: u.Cats, Stream: u.Lanes[0]}, l, acquiredAt, w.hooks())
	return w
}

// hooks are what w's lease asks of it.
func (w *Worker) hooks() lease.Hooks {
	return lease.Hooks{Halted: w.Halted, Await: w.awaitReplicas, Unpaused: w.unpaused,
		OnRefused: func(err error) {
			if !w.releasing() {
				w.releaseFaulted(err)
				w.RequestRelease()
			}
		}}
}

// ID is w's partition id (PartitionID, PMPartitionID).
func (w *Worker) ID() string { return w.unit.ID }

// Handler is w's handler's name.
func (w *Worker) Handler() string { return w.unit.Handler }

// Key is w's partition key, or a pm's correlation value.
func (w *Worker) Key() string { return w.unit.Key }

// Stream is w's first lane, which log lines name.
func (w *Worker) Stream() string { return w.unit.Lanes[0] }

// Held is the lease w runs under.
func (w *Worker) Held() *lease.Held { return w.held }

// Paused reports whether an operator's pause stopped w, as its last
// confirmation (or its handler's pause) found.
func (w *Worker) Paused() bool { return w.pause.paused.Load() }

// Holding reports whether w counts as owned: its lease not lost and no
// handover asked for (the owned counts of the unowned check).
func (w *Worker) Holding() bool { return w.held.Context().Err() == nil && !w.releasing() }

// Status is one owned partition, as runtime.PartitionStatus shows it.
type Status struct {
	Handler, Category, Key, Stream, Token string
	Generation                            int64
	Halted, Paused                        bool
	Halt                                  *contract.Halt // a copy, set when Halted
}

// Status is w's Status.
func (w *Worker) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.held.Lease()
	st := Status{Handler: w.unit.Handler, Category: strings.Join(w.unit.Cats, ","), Key: w.unit.Key, Stream: w.unit.Lanes[0],
		Token: l.Token(), Generation: l.Generation, Halted: w.halt != nil, Paused: w.pause.paused.Load()}
	if w.halt != nil {
		h := *w.halt // a copy: the caller may keep or change it
		st.Halt = &h
	}
	return st
}

// handover is how a worker is asked to hand its partition over.
type handover struct {
	once    sync.Once
	release chan struct{} // closed: hand over at the next boundary
	// at is when a handover was asked for (unix nanoseconds; 0: not
	// asked), which bounds how long a failing Redis call is retried.
	at atomic.Int64
	// onRelease resumes the sleeping worker when a release is asked for;
	// mu orders it with RequestRelease.
	mu        sync.Mutex
	onRelease func()
}

// RequestRelease asks w to hand its partition over at its next boundary
// (a message boundary, or at once when it sleeps).
func (w *Worker) RequestRelease() {
	w.hand.once.Do(func() {
		w.hand.at.Store(time.Now().UnixNano())
		close(w.hand.release)
		w.hand.mu.Lock()
		f := w.hand.onRelease
		w.hand.onRelease = nil
		w.hand.mu.Unlock()
		if f != nil {
			f()
		}
	})
}

// releasedAt is when a handover was asked for (zero time: not asked).
func (w *Worker) releasedAt() time.Time {
	if n := w.hand.at.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Start runs w on its own goroutine until it is released, its lease is
// lost, or it is fenced; onFinish is called once it has ended (a sleeping
// worker has no goroutine to wait for). It reclaims its predecessors'
// pending entries first.
func (w *Worker) Start(onFinish func()) {
	w.onFinish = onFinish
	go w.start()
}

// start reclaims, then works until the partition ends or sleeps.
func (w *Worker) start() {
	if !w.begin() {
		w.finish()
		return
	}
	w.resume()
}

// resume works the partition until it ends, then finishes it, or until
// it sleeps idle.
func (w *Worker) resume() {
	if !w.work() {
		w.finish()
	}
}

// releaseGrace bounds how long a worker asked to hand over (or to stop
// with Run) keeps retrying a failing Redis call before it gives up and
// leaves the entry to the next owner: Run returns within a bounded time
// whatever Redis does.
func (w *Worker) releaseGrace() time.Duration { return w.cfg().LeaseTTL }

// retryable handles a Redis error of a partition worker. Fenced (or a
// lost lease) ends the partition. A permanent error counts toward
// PermanentErrors, after which the partition is released (a fault).
// Otherwise it waits a backoff that doubles from RetryBackoff to MaxBackoff
// and returns true to retry, while the lease lasts and, once a handover or
// shutdown was asked for, for at most releaseGrace.
func (w *Worker) retryable(err error) bool {
	cfg := w.cfg()
	if errors.Is(err, rdb.ErrFenced) {
		w.held.Lost(err)
		return false
	}
	if w.held.Context().Err() != nil {
		return false
	}
	permanent := rdb.Permanent(err)
	if permanent {
		w.redisErrs.permanent++
		if w.redisErrs.permanent >= cfg.PermanentErrors {
			w.releaseFaulted(err)
			return false
		}
	}
	w.redisErrs.backoff = min(max(2*w.redisErrs.backoff, cfg.RetryBackoff), cfg.MaxBackoff)
	cfg.Log.Warn("seqby: redis error; retrying", "handler", w.unit.Handler, "stream", w.unit.Lanes[0], "permanent", permanent,
		"retry_in", w.redisErrs.backoff, "err", err)
	return w.backoff(w.redisErrs.backoff)
}

// backoff waits d; false when the partition must end meanwhile: its lease
// ended, or it was asked to hand over longer than releaseGrace ago.
func (w *Worker) backoff(d time.Duration) bool {
	for {
		release := w.hand.release
		if w.releasing() {
			release = nil
			left := time.Until(w.releasedAt().Add(w.releaseGrace()))
			if left <= 0 {
				w.cfg().Log.Warn("seqby: giving up on redis while handing over; the entry in hand, if any, is processed again by the next owner",
					"handler", w.unit.Handler, "stream", w.unit.Lanes[0])
				return false
			}
			d = min(d, left)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			return true
		case <-w.held.Context().Done():
			t.Stop()
			return false
		case <-release:
			t.Stop()
		}
	}
}

// redisErrs counts a worker's Redis errors since its last success. Only
// the partition's own goroutine touches it.
type redisErrs struct {
	permanent int
	backoff   time.Duration
}

// releaseFaulted reports that w gives up for permanent Redis errors: the
// instance record benches it for FaultBench (discovery does not claim it)
// and counts it toward this instance's stall, so others take it.
func (w *Worker) releaseFaulted(err error) {
	cfg := w.cfg()
	now := time.Now()
	category := strings.Join(w.unit.Cats, ",")
	cfg.Members.Release(w.unit.ID, membership.Fault{Kind: membership.FaultReleased, Handler: w.unit.Handler, Category: category, Key: w.unit.Key,
		Stream: w.unit.Lanes[0], Err: err, Since: now, Until: now.Add(cfg.FaultBench)})
}

// pauseFlags say whether an operator's pause stopped a worker.
type pauseFlags struct {
	// paused: the last confirmation found the partition paused by an
	// operator, or its handler is; it sleeps until resumed.
	paused atomic.Bool
	// handler: paused by its handler's pause.
	handler atomic.Bool
}

// sleepPaused leaves the partition idle while it is paused, and returns
// true (the worker sleeps). It first acks what ran (a batched partition
// may hold acks; the handler's pause is not in the scripts, so nothing
// acked them). A key's pause ends with a wake-up signal for the key
// counted after marks (one per category of the partition: a pm value has
// several; Resume sends one once the mark is gone); a handler's when hp's
// context ends; a release or the end of the lease ends either. It sleeps
// with no other timer than the idle safety net's (safetyNet: a due trim
// or cold release would only read the pause again), whose re-read
// (should Resume's signal be lost) finds the pause still there, or gone.
func (w *Worker) sleepPaused(marks []uint64, hp *lease.HandlerPause) bool {
	if len(w.r.unacked) > 0 {
		if err := w.ackUnacked(); err != nil && !pausedBy(err) {
			w.cfg().Log.Debug("seqby: acking before a pause failed; the acks go with the next read", "handler", w.unit.Handler, "stream", w.unit.Lanes[0], "err", err)
		}
	}
	w.pause.handler.Store(hp != nil)
	if !w.pause.paused.Swap(true) {
		w.cfg().Log.Info("seqby: partition paused by an operator; the entry in flight finished, no later one starts until it is resumed",
			"handler", w.unit.Handler, "partition", w.unit.Key, "stream", w.unit.Lanes[0], "handler_paused", hp != nil)
	}
	var until context.Context
	if hp != nil {
		until = hp.Context()
	}
	w.sleepUntil(w.safetyNet(), w.unit.Cats, marks, until)
	return true
}
