package worker

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/lease"
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

// cfg is the Set's Config.
func (w *Worker) cfg() *Config { return &w.set.cfg }

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

// Halted reports whether w is halted on its head.
func (w *Worker) Halted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.halt != nil
}

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

func (w *Worker) releasing() bool {
	select {
	case <-w.hand.release:
		return true
	default:
		return false
	}
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

// observeWork records what the metrics see of w's work after a read: en,
// when ok, is the oldest entry w has not handled, and the entries read
// ahead wait behind it.
func (w *Worker) observeWork(en rdb.Entry, ok, more bool) {
	if !ok {
		w.lag.Clear()
		return
	}
	w.lag.Set(en.ID, int64(len(w.r.ahead))+1, more)
}
