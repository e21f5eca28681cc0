package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/sleep"
	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// partition is one owned partition of a keyed handler: a lease and the
// lanes read under it, one message at a time. The lanes are a list so a
// later owner of several streams (a pm's correlation value) fits the same
// shape.
type partition struct {
	e        *Engine
	id       string
	reg      Registration
	category string
	key      string
	lanes    []string // primary, then backfill
	// held is the lease the partition runs under (package lease).
	held *lease.Held

	// A pm's correlation value (key) covers a stream per category: cats
	// are the pm's categories, laneCats the category of each lane, and the
	// first primaries lanes are the primary streams (see pm.go).
	cats      []string
	laneCats  []string
	primaries int

	releaseOnce sync.Once
	release     chan struct{} // closed: hand over at the next boundary
	// onRelease resumes the sleeping partition when a release is asked
	// for (sleep.go); relMu orders it with requestRelease.
	relMu     sync.Mutex
	onRelease func()
	// onFinish is called once finish is done: the worker group's Done,
	// counted for the partition, not for one of its goroutines.
	onFinish func()
	// loop is the worker loop (start): true when it went to sleep.
	loop func(*partition) bool

	mu   sync.Mutex
	halt *Halt
	// alertedAt is when the halt was last reported (realert).
	alertedAt time.Time

	trims trimmer // acks since the lanes were last trimmed (retention.go)
	// unacked are the entries processed and not acked yet, in order, all
	// on one lane (a read's, and its prefetch's, which follows a full
	// read of the first lane that carried every earlier ack): their
	// fenced ack is sent with the
	// next read, or alone before the next entry runs. Under the default
	// promise there is at most one, acked before anything else of the
	// partition runs; with Registration.AckBatch N, up to N-1 wait while
	// the next entry runs (batched: see next). Only the partition's own
	// goroutine touches it.
	unacked []rdb.Entry
	// prefetch is a batched partition's read of new entries sent before
	// the entries it holds ran out (nil: none in flight), carrying the
	// acks of the first prefetchAcks entries of unacked; prefetchSent and
	// prefetchMark are its send time and the wake-up mark taken before
	// it. No other call of the partition goes while it is in flight, so
	// its acks land in order. Only the partition's own goroutine touches
	// them.
	prefetch     *rdb.Prefetch
	prefetchAcks int
	prefetchSent time.Time
	prefetchMark uint64
	// active is when the worker last had work (its claim, or its last
	// entry): once idle for ReapAfter it asks Redis whether the partition
	// is cold (reaper.go). Only the partition's own goroutine touches it.
	active time.Time

	// ahead are entries read ahead (Options.ReadAhead), in order, not run
	// yet: each runs only after the entry before it is acked. Only the
	// partition's own goroutine touches it.
	ahead []rdb.Entry
	// drained: the last read saw nothing after what it returned, so once
	// those have run the last ack goes alone and the worker waits for a
	// signal counted after readMark, the wake-up mark taken before that
	// read. Only the partition's own goroutine touches them.
	drained  bool
	readMark uint64
	// deep: the last read was full and saw more after it, a backlog
	// deeper than one read: its calls go first in the Batcher's rounds,
	// so a hot key's round trip does not wait behind every cold
	// partition's. Only the partition's own goroutine touches it.
	deep bool

	// lag is what the metrics' gauges see of the partition's work: the
	// oldest entry read and not handled, how many were read, and whether
	// the last read was full (more wait in Redis). Set by observeWork.
	lag telemetry.Lag

	// head is the halted head, retried from memory: reading it again would
	// count one more delivery (MaxDeliveries counts owners). Only the
	// partition's own goroutine touches it.
	head *rdb.Entry

	// prior is a halt record found at claim whose head is still pending;
	// it is removed once this owner acks that head (haltrecord.go). Only
	// the partition's own goroutine touches it.
	prior *priorHalt

	// redisErrs counts Redis errors since the last success (fault.go).
	redisErrs redisErrs
	// releaseAt is when a handover was asked for (unix nanoseconds; 0:
	// not asked), which bounds how long a failing Redis call is retried.
	releaseAt atomic.Int64
	// paused: the last confirmation found the partition paused by an
	// operator, or its handler is (package lease, Pauses); it sleeps until resumed.
	// pausedHandler: by its handler's pause.
	paused        atomic.Bool
	pausedHandler atomic.Bool
	// stopped is the entry whose retries a handover interrupted: not in
	// flight, so its delivery is given back at release. Only the
	// partition's own goroutine touches it.
	stopped *rdb.Entry
}

func partitionID(group, stream string) string { return group + "\x00" + stream }

// newPartition wraps an acquired lease; acquiredAt is when the acquire was
// sent, the earliest the Redis TTL can have started.
func (e *Engine) newPartition(base context.Context, c consumer, key string, l rdb.Lease, acquiredAt time.Time) *partition {
	stream := rdb.PartitionStream(c.category, key)
	p := &partition{
		e: e, id: partitionID(c.reg.Name, stream), reg: c.reg, category: c.category, key: key,
		lanes:   []string{stream, rdb.BackfillStream(c.category, key, e.o.BackfillSuffix)},
		release: make(chan struct{}),
		active:  time.Now(),
	}
	p.held = e.leases.Hold(base, lease.Ident{Handler: c.reg.Name, Key: key, Cats: []string{c.category}, Stream: stream}, l, acquiredAt, p.hooks())
	return p
}

// hooks are what p's lease asks of it.
func (p *partition) hooks() lease.Hooks {
	return lease.Hooks{Halted: p.isHalted, Await: p.awaitReplicas, Unpaused: p.unpaused,
		OnRefused: func(err error) {
			if !p.releasing() {
				p.e.releaseFaulted(p, err)
				p.requestRelease()
			}
		}}
}

func (p *partition) requestRelease() {
	p.releaseOnce.Do(func() {
		p.releaseAt.Store(time.Now().UnixNano())
		close(p.release)
		p.relMu.Lock()
		f := p.onRelease
		p.onRelease = nil
		p.relMu.Unlock()
		if f != nil {
			f()
		}
	})
}

// releasedAt is when a handover was asked for (zero time: not asked).
func (p *partition) releasedAt() time.Time {
	if n := p.releaseAt.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// holding reports whether p counts as owned: its lease not lost and no
// handover asked for (the owned counts of the unowned check).
func (p *partition) holding() bool { return p.held.Context().Err() == nil && !p.releasing() }

func (p *partition) releasing() bool {
	select {
	case <-p.release:
		return true
	default:
		return false
	}
}

func (p *partition) status() PartitionStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	category := p.category
	if p.cats != nil {
		category = strings.Join(p.cats, ",")
	}
	st := PartitionStatus{Handler: p.reg.Name, Category: category, Key: p.key, Stream: p.lanes[0],
		Token: p.held.Lease().Token(), Generation: p.held.Lease().Generation, Halted: p.halt != nil, Paused: p.paused.Load()}
	if p.halt != nil {
		h := *p.halt // a copy: the caller may keep or change it
		st.Halt = &h
	}
	return st
}

// run works the partition until it is released, its lease is lost, or it
// is fenced. It reclaims its predecessors' pending entries first. An idle
// partition keeps no goroutine: it sleeps (sleep.go) and resumes on a new
// one.
func (p *partition) run() { p.start((*partition).work) }

// start reclaims, then runs work (the worker loop of a keyed partition or
// of a pm's correlation value) until the partition ends or sleeps.
func (p *partition) start(work func(*partition) (asleep bool)) {
	p.loop = work
	if !p.begin() {
		p.finish()
		return
	}
	p.resume()
}

// resume works the partition until it ends, then finishes it, or until
// it sleeps idle.
func (p *partition) resume() {
	if !p.loop(p) {
		p.finish()
	}
}

// work is the worker loop; true: it sleeps (sleep armed what resumes it),
// false: the partition must end.
func (p *partition) work() (asleep bool) {
	e := p.e
	for !p.parked() {
		seq := e.wake.Mark(p.category, p.key)
		if hp := e.pauses.Paused(p.reg.Name); hp != nil {
			return p.sleepPaused([]uint64{seq}, hp)
		}
		p.handlerResumed()
		var confirmed time.Time // when the fenced call that returned en was sent (the fence rule)
		en, ok, err := p.heldHead()
		if !ok {
			en, ok, confirmed, err = p.next(seq)
		}
		if pausedBy(err) {
			return p.sleepPaused([]uint64{pausedMark(err, seq)}, nil)
		}
		if err != nil {
			if !p.retryable(err) {
				return false
			}
			continue
		}
		p.redisOK()
		p.observeWork(en, ok, !p.drained)
		if !ok {
			p.trimIf(true)
			if p.releaseCold() {
				return false
			}
			p.sleep(p.idleWait(), []string{p.category}, []uint64{p.readMark})
			return true
		}
		p.held.NameIf(en)
		out, h := executor.OutHalt, e.exec.OverDelivered(p.reg.Name, p.category, en)
		var g *lease.Gate
		if h == nil {
			g = p.held.Gate(confirmed, p.hasHaltRecord(en))
			out, h = e.exec.Handle(p.held.Context(), p.release, g, p.reg.Name, p.category, en, p.isHalted())
		}
		if out == executor.OutPause {
			// No attempt started: the entry runs first once resumed (a
			// halted head stays held as the head).
			if p.head == nil {
				p.ahead = append([]rdb.Entry{en}, p.ahead...)
			}
			return p.sleepPaused([]uint64{seq}, g.Pause())
		}
		e.countSettled(p.reg.Name, p.category, out)
		if !p.settle(en, out, (*Halt)(h)) {
			return false
		}
		p.active = time.Now()
		p.trimIf(false)
	}
	return false
}

// next returns the partition's next entry (ok false: drained): the
// first entry read ahead, once the entries before it are acked (fenced),
// or else the first of a fenced read that carries those acks (seq: the
// wake-up mark taken before it). When the last read saw nothing more, the
// last acks go alone, a cheaper call, and the worker waits for a signal
// counted after that read (an entry published since has one). confirmed
// is when the fenced call that confirmed the lease for the entry was sent
// (zero: none was, the entry came from memory), for the fence rule
// (package lease).
//
// Batched (Registration.AckBatch N > 1): an entry read ahead runs without
// waiting for the acks of those before it while fewer than N are
// unanswered and the last confirmation is within Options.VerifyBound; it
// counts from that confirmation. Else the unanswered acks go first, in
// one fenced call, which confirms the lease anew. So at most N entries,
// the one in flight included, can run again after a crash or a stall, in
// order.
func (p *partition) next(seq uint64) (en rdb.Entry, ok bool, confirmed time.Time, err error) {
	e := p.e
	batch := max(p.reg.AckBatch, 1)
	if p.prefetch != nil && (len(p.ahead) == 0 || len(p.unacked) >= batch || p.prefetch.Ready() ||
		time.Since(p.held.ConfirmedAt) > e.o.VerifyBound) {
		if err := p.collect(p.held.Context()); err != nil {
			return rdb.Entry{}, false, time.Time{}, err
		}
	}
	if len(p.ahead) == 0 && p.drained && len(p.unacked) > 0 {
		sent := time.Now()
		if err := p.ackUnacked(); err != nil {
			return rdb.Entry{}, false, time.Time{}, err
		}
		p.held.ConfirmedAt = sent
		return rdb.Entry{}, false, time.Time{}, nil
	}
	if len(p.ahead) == 0 {
		sent := time.Now()
		es, more, err := e.batch.ReadAhead(p.held.Context(), p.held.Lease(), p.reg.Name, p.lanes, p.readCount(), p.unacked, p.deep)
		if pausedBy(err) {
			p.ackedPrevious() // the acks it carried were done
		}
		if err != nil {
			return rdb.Entry{}, false, time.Time{}, err
		}
		p.unpaused()
		p.held.ConfirmedAt = sent
		p.ackedPrevious()
		p.readMark, p.drained = seq, !more
		p.deep = more && len(es) >= p.readCount()
		if len(es) == 0 {
			return rdb.Entry{}, false, time.Time{}, nil
		}
		p.ahead = es[1:]
		return es[0], true, sent, nil
	}
	confirmed = p.held.ConfirmedAt
	// (A prefetch in flight was collected above in both cases, so the
	// acks below are the only call in flight, sent now.)
	if len(p.unacked) > 0 && (len(p.unacked) >= batch || time.Since(p.held.ConfirmedAt) > e.o.VerifyBound) {
		confirmed = time.Now()
		if err := p.ackUnacked(); err != nil {
			return rdb.Entry{}, false, time.Time{}, err
		}
		p.held.ConfirmedAt = confirmed
	}
	p.prefetchIf(seq)
	en = p.ahead[0]
	p.ahead = p.ahead[1:]
	return en, true, confirmed, nil
}

// ackUnacked acks p.unacked in one fenced call of the Batcher's next
// round (after the prefetch in flight, if any, is answered), then does
// what follows (ackedPrevious).
func (p *partition) ackUnacked() error {
	// A prefetch that found the partition paused did its acks: the rest
	// still go.
	paused := p.collect(p.held.Context())
	if paused != nil && !pausedBy(paused) {
		return paused
	}
	if len(p.unacked) == 0 {
		return paused
	}
	err := p.e.batch.AckEntries(p.held.Context(), p.held.Lease(), p.reg.Name, p.unacked, p.deep)
	if err != nil && !pausedBy(err) {
		return err
	}
	// Paused: the acks were done, and the lease is not confirmed for the
	// next entry (the caller sleeps).
	p.ackedPrevious()
	if err == nil {
		// The ack found no pause mark: a pause the prefetch found was
		// resumed since (its wake-up may already have been read).
		p.unpaused()
	}
	return err
}

// prefetchIf sends, for a batched partition whose backlog is deeper than
// one read, the read of its next entries once half of those it holds
// have run, so they are in by the time the rest have (the batched mode
// pays one round trip per batch; this hides it). It carries the acks of
// the entries run so far.
func (p *partition) prefetchIf(seq uint64) {
	n := p.readCount()
	if p.reg.AckBatch <= 1 || p.prefetch != nil || !p.deep || len(p.ahead) > n/2 {
		return
	}
	p.prefetchSent, p.prefetchMark, p.prefetchAcks = time.Now(), seq, len(p.unacked)
	// Every entry the owner holds pending bounds what a resent prefetch
	// hands back (RoundSlice.After): those read ahead, and a halted or
	// interrupted head kept in memory.
	held := p.ahead
	for _, e := range []*rdb.Entry{p.head, p.stopped} {
		if e != nil {
			held = append(held[:len(held):len(held)], *e)
		}
	}
	p.prefetch = p.e.batch.ReadNew(p.held.Lease(), p.reg.Name, p.lanes, n, p.unacked, held)
}

// collect takes the reply of the prefetch in flight (none: nothing to
// do): the acks it carried are done, and its entries follow those held.
//
// On an error the entries it may have delivered (its reply may be what
// was lost) stay pending under this owner, newer than those held: deep is
// cleared, so no prefetch goes until a read (with its pending pass, once
// the held entries have run) hands them over, in order. A prefetch that
// found nothing new on the first lane says nothing of the later lanes, so
// the partition is not taken for drained either: the read that follows
// once the held entries have run decides, with a fresh wake-up mark.
func (p *partition) collect(ctx context.Context) error {
	if p.prefetch == nil {
		return nil
	}
	es, more, err := p.prefetch.Wait(ctx)
	k, sent, mark := p.prefetchAcks, p.prefetchSent, p.prefetchMark
	p.prefetch, p.prefetchAcks = nil, 0
	if pausedBy(err) {
		p.ackedFirst(k) // the acks it carried were done
		p.deep = false
		return prefetchPaused{mark: mark, err: err}
	}
	if err != nil {
		p.deep = false
		return err
	}
	p.ackedFirst(k)
	p.held.ConfirmedAt = sent
	if len(es) == 0 {
		p.deep, p.drained = false, false
		return nil
	}
	p.ahead = append(p.ahead, es...)
	p.deep = more && len(es) >= p.readCount()
	if p.drained = !more; p.drained {
		p.readMark = mark
	}
	return nil
}

// prefetchPaused is the pause a prefetch found. It was sent under an
// older wake-up mark than the worker's latest, which the worker sleeps on
// (pausedMark): a Resume whose wake-up came between the prefetch's run
// and the worker's mark still wakes it.
type prefetchPaused struct {
	mark uint64 // the wake-up mark the prefetch was sent under
	err  error  // rdb.ErrPaused's
}

func (e prefetchPaused) Error() string { return e.err.Error() }
func (e prefetchPaused) Unwrap() error { return e.err }

// pausedMark is the wake-up mark a worker that found its partition paused
// (err) sleeps on: seq, the mark taken before its own calls, or the older
// one of the prefetch that found the pause.
func pausedMark(err error, seq uint64) uint64 {
	var pp prefetchPaused
	if errors.As(err, &pp) {
		return min(seq, pp.mark)
	}
	return seq
}

// readCount is how many new entries one read of p takes at most:
// Options.ReadAhead, or the handler's AckBatch when larger, so a batched
// partition has a batch to run.
func (p *partition) readCount() int { return max(p.e.o.ReadAhead, p.reg.AckBatch) }

// trimIf runs retention on p's lanes when it is due (drained: the last
// read found them empty).
func (p *partition) trimIf(drained bool) {
	// A batched partition trims every 10 batches: a trim costs a round
	// trip per lane, which, every trimEvery acks, would outnumber its
	// reads (one per batch).
	if !p.trims.due(drained, max(trimEvery, 10*p.reg.AckBatch)) {
		return
	}
	cats := p.laneCats
	if cats == nil {
		cats = []string{p.category, p.category}
	}
	p.e.trim(p.held.Context(), p.reg.Name, &p.trims, cats, p.lanes)
}

// begin reclaims the past owners' pending entries, so they are applied
// first, and settles a halt record left by a predecessor. False: the
// partition must end.
func (p *partition) begin() bool {
	// A predecessor may have acked entries and let the partition go
	// before trimming them: trim once drained here too, or the lanes
	// never empty and the partition never turns cold until its key's
	// next publish.
	p.trims.inherit()
	return p.reclaim() && p.checkHaltRecord()
}

// parked reports whether the worker must stop: the lease ended or a
// release was asked for. A halted partition holds its head meanwhile: it
// waits HaltedRetryInterval and then goes on (the next read returns the
// head, for one more attempt), or, when its failure is permanent or
// retries are off, until it is released or its lease ends.
func (p *partition) parked() bool {
	if p.held.Context().Err() != nil || p.releasing() {
		return true
	}
	p.mu.Lock()
	halted, permanent := p.halt != nil, p.halt != nil && p.halt.Permanent
	p.mu.Unlock()
	if !halted {
		return false
	}
	var retry <-chan time.Time
	if d := p.haltedRetry(); d > 0 && !permanent {
		t := time.NewTimer(d)
		defer t.Stop()
		retry = t.C
	}
	for {
		var realert <-chan time.Time
		var rt *time.Timer
		if d := p.e.o.HaltRealertInterval; d > 0 {
			p.mu.Lock()
			rt = time.NewTimer(time.Until(p.alertedAt.Add(d)))
			p.mu.Unlock()
			realert = rt.C
		}
		select {
		case <-p.held.Context().Done():
			return true
		case <-p.release:
			return true
		case <-retry:
			return false
		case <-realert:
			p.realert()
		}
		if rt != nil {
			rt.Stop()
		}
	}
}

// realert reports p's halt again: it is still unresolved.
func (p *partition) realert() {
	p.mu.Lock()
	if p.halt == nil {
		p.mu.Unlock()
		return
	}
	p.halt.Alerts++
	p.alertedAt = time.Now()
	h := *p.halt
	p.mu.Unlock()
	p.e.log.Error("seqby: partition still halted; nothing later for the key is applied until an operator resolves it (seqbyctl halted, inspect, skip, dlq)",
		"handler", h.Handler, "category", h.Category, "key", h.Key, "stream", h.Stream, "entry", h.EntryID,
		"halted_for", time.Since(h.At).Round(time.Second), "alerts", h.Alerts, "reason", h.Reason, "err", h.Err)
	p.e.alert(h)
}

// heldHead returns the halted head to retry (ok), if p holds one.
func (p *partition) heldHead() (rdb.Entry, bool, error) {
	if p.head == nil {
		return rdb.Entry{}, false, nil
	}
	return *p.head, true, nil
}

// haltedRetry is how often p's halted head is retried (0 or less: never).
func (p *partition) haltedRetry() time.Duration {
	return p.e.exec.Policy(p.reg.Name).HaltedRetryInterval
}

// settle finishes one entry by its outcome: a halt is recorded and
// reported (the entry stays pending as the head), a processed entry is
// acked under the fence by the next read (or by flushAck as the worker
// ends), before anything else of the partition runs. False: the partition must end (lease lost,
// stopping, or fenced).
func (p *partition) settle(en rdb.Entry, out executor.Outcome, h *Halt) bool {
	e := p.e
	switch out {
	case executor.OutLost:
		return false
	case executor.OutStop:
		p.stopped = &en
		return false
	case executor.OutHalt:
		if !p.ackBeforeHalt() {
			return false
		}
		h.Key, h.Generation = p.key, p.held.Lease().Generation
		p.mu.Lock()
		prev := p.halt
		if prev != nil {
			// A halted head failed its retry: still the same halt, already
			// reported and recorded.
			prev.Err, prev.Permanent = h.Err, h.Permanent
		} else {
			p.halt = h
		}
		p.mu.Unlock()
		p.head = &en
		if prev != nil {
			e.log.Warn("seqby: the halted head failed again", "handler", p.reg.Name, "stream", en.Stream, "entry", en.ID,
				"permanent", h.Permanent, "retry_in", p.haltedRetry(), "err", h.Err)
			return true
		}
		p.mu.Lock()
		h.Alerts, p.alertedAt = 1, time.Now()
		report := *h
		p.mu.Unlock()
		e.reportHalt(report)
		return p.recordHalt(h)
	}
	// In the strict mode the entry's effects (a fenced commit through the
	// engine's client, a pm's state) are on the replicas of the primary
	// the attempt started on before its ack goes: an ack answered by a
	// new primary for a commit the old one took with it would lose the
	// event. A new primary meanwhile ends the partition unacked, and the
	// next owner runs the entry again (the event in flight).
	if p.awaitReplicas(p.held.Context()) != nil {
		// It ran, and runs again at the next owner: no poison, so its
		// delivery goes back with it (MaxDeliveries) where the lease is
		// still this owner's.
		p.stopped = &en
		return false
	}
	// The ack rides on the next read (ackedPrevious), or is sent alone
	// before the next entry runs, or when the worker ends (flushAck).
	p.unacked = append(p.unacked, en)
	p.mu.Lock()
	recovered := p.halt
	p.halt = nil
	p.mu.Unlock()
	p.head = nil
	if recovered != nil {
		e.log.Info("seqby: the halted head succeeded on a retry; the partition resumes", "handler", p.reg.Name,
			"stream", en.Stream, "entry", en.ID, "halted_at", recovered.At)
	}
	return true
}

// ackBeforeHalt acks the entries a batched partition ran before the one
// it halts on, so the halted head is its oldest pending entry, as a
// successor's halt record check and the operators' tools expect (under
// the default promise they are acked already). False: the partition must
// end.
func (p *partition) ackBeforeHalt() bool {
	for len(p.unacked) > 0 {
		err := p.ackUnacked()
		if err == nil || pausedBy(err) { // paused: acked all the same
			p.redisOK()
			return true
		}
		if !p.retryable(err) {
			return false
		}
	}
	return true
}

// finish releases the lease and forgets the partition. A lease counted
// lost only by the local deadline may still hold this token in Redis (a
// renew that timed out here but was applied there extends it by a full
// TTL), so it is released too: the release is compare-and-delete, which
// never removes a successor's lease. Only a lease Redis already reported
// gone is left alone.
func (p *partition) finish() {
	e := p.e
	if p.prefetch != nil && p.held.Context().Err() == nil {
		// A graceful end: take the prefetch's entries, so the release
		// hands them on with the others held (handing). On an error they
		// stay pending here, and the next owner reclaims them.
		ctx, cancel := context.WithTimeout(p.held.Context(), e.releaseGrace())
		if err := p.collect(ctx); errors.Is(err, ErrFenced) {
			p.held.Lost(err)
		}
		cancel()
	}
	p.flushAck()
	if !p.held.End() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(p.held.Context()), e.o.LeaseTTL)
		if err := p.held.Lease().ReleaseHanding(ctx, e.c, p.reg.Name, p.handing()); err != nil {
			e.log.Warn("seqby: release failed; the lease will expire after its TTL, and the partition's next owner waits for that", "handler", p.reg.Name, "stream", p.lanes[0], "err", err)
		} else {
			e.log.Debug("seqby: released", "handler", p.reg.Name, "partition", p.key, "stream", p.lanes[0])
		}
		cancel()
	}
	p.reportLossOrResolution()
	p.held.Cancel(errors.New("partition stopped"))
	if p.cats != nil {
		for _, c := range p.cats {
			e.wake.Forget(c, p.key)
		}
	} else {
		e.wake.Forget(p.category, p.key)
	}
	e.mu.Lock()
	delete(e.parts, p.id)
	e.mu.Unlock()
	if p.onFinish != nil {
		p.onFinish()
	}
}

// handing is what a graceful release hands on that is pending under this
// owner and not in flight (release.lua gives their deliveries back): the
// halted head, the entry whose retries a handover stopped, the entries
// read ahead and never run.
func (p *partition) handing() []rdb.Entry {
	var out []rdb.Entry
	if p.head != nil {
		out = append(out, *p.head)
	}
	if p.stopped != nil {
		out = append(out, *p.stopped)
	}
	return append(out, p.ahead...)
}

// ackedPrevious does what follows the ack of p.unacked, once a call that
// carried it succeeded.
func (p *partition) ackedPrevious() { p.ackedFirst(len(p.unacked)) }

// ackedFirst does what follows the ack of the first n entries of
// p.unacked, once a call that carried them succeeded.
func (p *partition) ackedFirst(n int) {
	if n == 0 {
		return
	}
	for _, en := range p.unacked[:n] {
		p.acked(en)
		p.trims.acked()
		p.e.members.Worked(p.reg.Name)
	}
	rest := copy(p.unacked, p.unacked[n:])
	clear(p.unacked[rest:])
	p.unacked = p.unacked[:rest]
	// The marked head, if one ran, is acked: a retried head is the first
	// entry a partition runs after its halt.
	p.held.EndAttempt()
}

// flushAck sends the acks of p.unacked on their own as the worker ends,
// unless Redis already said the lease is gone: fenced, so it is safe even
// after the local deadline cancelled p.held.Context(). It retries for at most
// releaseGrace; if it fails, the entries run again on the next owner
// (at-least-once), never out of order: the next owner reclaims them
// first.
func (p *partition) flushAck() {
	if len(p.unacked) == 0 || p.held.Gone() {
		return
	}
	e := p.e
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.held.Context()), e.releaseGrace())
	defer cancel()
	for backoff := e.o.RetryBackoff; ; backoff = min(2*backoff, e.o.MaxBackoff) {
		err := rdb.FencedAckEntries(ctx, e.c, p.held.Lease(), p.reg.Name, p.unacked)
		if err == nil || pausedBy(err) { // paused: acked all the same
			p.ackedPrevious()
			return
		}
		if errors.Is(err, ErrFenced) || rdb.Permanent(err) || !sleep.For(ctx, backoff) {
			last := p.unacked[len(p.unacked)-1]
			e.log.Warn("seqby: processed entries were not acked; their next owner runs them again", "handler", p.reg.Name, "stream", last.Stream, "entries", len(p.unacked), "last_entry", last.ID, "err", err)
			return
		}
	}
}

// reclaim moves the past owners' pending entries on every lane to this
// owner, so they are applied first. False: the partition must end.
func (p *partition) reclaim() bool {
	e := p.e
	for {
		n, err := rdb.Reclaim(p.held.Context(), e.c, p.held.Lease(), p.reg.Name, p.lanes)
		if err == nil {
			p.redisOK()
			if n > 0 {
				e.telemetry.EntriesReclaimed(p.reg.Name, n)
				e.log.Info("seqby: reclaimed pending entries of past owners", "handler", p.reg.Name, "partition", p.key, "stream", p.lanes[0], "entries", n, "token", p.held.Lease().Token())
			}
			return true
		}
		if !p.retryable(err) {
			return false
		}
	}
}

// idleRecheck is a safety net re-read of an idle partition, should a
// wake-up signal never have been written (a publisher that died between
// the entry and its signal on a cluster); signals normally wake it, and
// a reader that lost signals to the stream's cap wakes every partition
// (wake.Waiter).
const idleRecheck = 30 * time.Second

// idleRecheckEach spaces the safety net re-reads of an instance with many
// idle partitions (idleWait).
const idleRecheckEach = time.Second

func (p *partition) isHalted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.halt != nil
}
