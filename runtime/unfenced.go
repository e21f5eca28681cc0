package runtime

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Unkeyed handlers promise no order, so they need no lease: instances
// share one consumer group per stream and Redis balances by message. The
// consumer name is the instance's OwnerID, and instances announce
// themselves in the handler's member set (unkeyed_members.go), so:
//   - entries pending on a consumer that is not live, for at least
//     LeaseTTL, are claimed by a live one; a live but slow consumer keeps
//     its in-flight entry;
//   - a consumer that is not live and has nothing pending is deleted, so
//     the group does not collect one consumer per process start;
//   - a message whose retries are exhausted stays pending on its consumer
//     and the worker moves on: it is alerted once and never re-run by the
//     instance that halted on it, only by another one after that instance
//     is gone.

// runPlain consumes an unpartitioned category's stream {category}.
func (e *Engine) runPlain(base context.Context, stop <-chan struct{}, c consumer) {
	stream, group := c.category, c.reg.Name
	for !e.ensureGroup(base, stop, stream, group, true) {
		if !sleepOr(stop, e.o.RetryBackoff) {
			return
		}
	}
	st := e.joinUnkeyed(base, group)
	defer e.leaveUnkeyed(group)
	u := unfenced{e: e, base: base, stop: stop, c: c, st: st, group: group, lanes: []string{stream}}
	u.drainPending()
	lastClaim := time.Now()
	backoff := e.o.RetryBackoff
	for {
		select {
		case <-stop:
			return
		default:
		}
		// One stream per worker: checking for dead consumers each
		// discovery cycle is cheap and bounds takeover near LeaseTTL.
		if time.Since(lastClaim) > e.o.DiscoveryInterval {
			u.claimStale()
			lastClaim = time.Now()
		}
		ctx, cancel := context.WithTimeout(base, e.o.BlockTimeout+5*time.Second)
		ens, err := rdb.ReadGroup(ctx, e.c, stream, group, e.o.OwnerID, ">", 1, e.o.BlockTimeout)
		cancel()
		if err != nil {
			if rdb.IsNoGroup(err) {
				e.ensureGroup(base, stop, stream, group, true)
				continue
			}
			e.log.Warn("seqby: read failed; retrying", "handler", group, "stream", stream, "err", err)
			if !sleepOr(stop, backoff) {
				return
			}
			backoff = min(2*backoff, e.o.MaxBackoff)
			continue
		}
		if len(ens) == 0 {
			u.trimIf(true)
			continue
		}
		backoff = e.o.RetryBackoff
		for _, en := range ens {
			u.process(en)
		}
		u.trimIf(false)
	}
}

// trimIf runs retention on u's lanes when it is due (drained: the last
// reads found them empty).
func (u *unfenced) trimIf(drained bool) {
	if !u.trims.due(drained, trimEvery) {
		return
	}
	cats := make([]string, len(u.lanes))
	for i := range cats {
		cats[i] = u.c.category
	}
	u.e.trim(u.base, u.group, &u.trims, cats, u.lanes)
}

// fanWorker is a running worker of an unkeyed handler on one partition.
type fanWorker struct {
	quit   chan struct{} // closed when the partition left the index
	exited chan struct{} // closed when the worker returned
}

// startFans starts a worker for every partition of a category that an
// unkeyed handler does not read yet, found through the index, and stops
// the workers of partitions no longer in it (reaped), so their number
// follows the index.
func (e *Engine) startFans(base context.Context, stop <-chan struct{}, c consumer, running map[string]*fanWorker, wg *sync.WaitGroup) {
	ctx, cancel := context.WithTimeout(base, max(e.o.DiscoveryInterval, time.Second))
	keys, err := e.partitions(ctx, c.category)
	cancel()
	if err != nil {
		e.log.Warn("seqby: reading the partition index failed", "category", c.category, "err", err)
		return
	}
	present := map[string]bool{}
	for _, k := range keys {
		present[partitionID(c.reg.Name, rdb.PartitionStream(c.category, k))] = true
	}
	prefix := partitionID(c.reg.Name, c.category+":{")
	for id, w := range running {
		if !strings.HasPrefix(id, prefix) {
			continue // another consumer's
		}
		select {
		case <-w.exited:
			delete(running, id) // started again below if its key is back
			continue
		default:
		}
		if !present[id] {
			select {
			case <-w.quit:
			default:
				close(w.quit)
			}
		}
	}
	for _, k := range keys {
		id := partitionID(c.reg.Name, rdb.PartitionStream(c.category, k))
		if running[id] != nil || checkKeySuffix(c.category, "", k, e.o.BackfillSuffix) != nil {
			continue
		}
		w := &fanWorker{quit: make(chan struct{}), exited: make(chan struct{})}
		running[id] = w
		halt := make(chan struct{})
		u := &unfenced{e: e, base: base, stop: halt, c: c, group: c.reg.Name, key: k,
			lanes: []string{rdb.PartitionStream(c.category, k), rdb.BackfillStream(c.category, k, e.o.BackfillSuffix)}}
		// Join before the goroutine starts, so the instance is announced
		// before its first read of the partition.
		u.st = e.joinUnkeyed(base, u.group)
		wg.Add(2)
		go func() {
			// The worker stops on the engine's stop or its own quit.
			defer wg.Done()
			select {
			case <-stop:
			case <-w.quit:
			case <-w.exited:
			}
			close(halt)
		}()
		go func() {
			defer wg.Done()
			defer close(w.exited)
			defer e.leaveUnkeyed(u.group)
			u.runFan()
		}()
	}
}

type unfenced struct {
	trims trimmer // acks since the lanes were last trimmed (retention.go)
	e     *Engine
	base  context.Context
	stop  <-chan struct{}
	c     consumer
	st    *unkeyedState
	group string
	key   string
	lanes []string
}

// fanClaimInterval is how often a partition's worker looks for dead
// consumers. Their entries become claimable only LeaseTTL after their
// last heartbeat, and each check costs one XINFO per lane per partition,
// so an idle instance with many partitions checks each about once per
// LeaseTTL (a dead consumer's entries are taken within 2 LeaseTTLs).
func (u *unfenced) fanClaimInterval() time.Duration {
	return max(u.e.o.DiscoveryInterval, u.e.o.LeaseTTL)
}

// runFan reads one partition's lanes in an unkeyed handler's group.
func (u *unfenced) runFan() {
	e := u.e
	for _, l := range u.lanes {
		e.ensureGroup(u.base, u.stop, l, u.group, false)
	}
	u.claimStale()
	u.drainPending()
	// Spread the checks of partitions started together over the interval.
	lastClaim := time.Now().Add(-rand.N(max(u.fanClaimInterval()/2, 1)))
	backoff := e.o.RetryBackoff
	for {
		select {
		case <-u.stop:
			return
		default:
		}
		if time.Since(lastClaim) >= u.fanClaimInterval() {
			u.claimStale()
			lastClaim = time.Now()
		}
		seq := e.wake.Mark(u.c.category, u.key)
		got, failed := false, false
		for _, l := range u.lanes {
			ens, err := u.readNew(l)
			if rdb.IsNoGroup(err) {
				// The lane's first entry arrived after the worker started
				// (typically a first backfill entry): its signal is already
				// counted, so read it now rather than wait for another.
				// A lane that does not exist yet leaves err nil: empty.
				var ok bool
				if ok, err = e.createGroup(u.base, l, u.group, false); ok {
					ens, err = u.readNew(l)
				}
			}
			if err != nil {
				e.log.Warn("seqby: read failed; retrying", "handler", u.group, "stream", l, "err", err)
				failed = true
				continue
			}
			for _, en := range ens {
				got = true
				u.process(en)
			}
			if got {
				break
			}
		}
		if got {
			backoff = e.o.RetryBackoff
			u.trimIf(false)
			continue
		}
		if failed {
			// A lane may hold entries whose signal was already counted:
			// retry the reads after a backoff instead of waiting for one.
			if !sleepOr(u.stop, backoff) {
				return
			}
			backoff = min(2*backoff, e.o.MaxBackoff)
			continue
		}
		backoff = e.o.RetryBackoff
		u.trimIf(true)
		wait := min(idleRecheck, max(time.Until(lastClaim.Add(u.fanClaimInterval())), time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-e.wake.Wait(u.c.category, u.key, seq):
		case <-u.stop:
			t.Stop()
			return
		case <-t.C:
		}
		t.Stop()
	}
}

// readNew reads the next new entry of lane without blocking (the waiter
// wakes the worker), so fans hold no pool connection while idle.
func (u *unfenced) readNew(lane string) ([]rdb.Entry, error) {
	ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
	defer cancel()
	return rdb.ReadGroup(ctx, u.e.c, lane, u.group, u.e.o.OwnerID, ">", 1, -1)
}

// drainPending processes this consumer's own pending entries (left by a
// restart under the same name) before new ones, except those it halted on.
func (u *unfenced) drainPending() {
	for _, l := range u.lanes {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		ens, err := rdb.ReadGroup(ctx, u.e.c, l, u.group, u.e.o.OwnerID, "0", 100, -1)
		cancel()
		if err != nil {
			continue
		}
		for _, en := range ens {
			u.process(en)
		}
	}
}

// claimStale takes over the entries of consumers that are not live
// (pending at least LeaseTTL) and processes them, deletes such consumers
// once they have nothing pending, and re-runs this consumer's own entries
// left pending by a failed ack. Never touches a live consumer, nor an
// entry this instance halted on.
func (u *unfenced) claimStale() {
	e := u.e
	ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
	live, err := e.liveMembersCached(ctx, u.st, u.group)
	cancel()
	if err != nil {
		e.log.Warn("seqby: cannot tell dead consumers from live ones; not claiming", "handler", u.group, "err", err)
		return
	}
	for _, l := range u.lanes {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		cons, err := rdb.Consumers(ctx, e.c, l, u.group)
		cancel()
		if err != nil {
			continue // no such lane or group yet
		}
		for _, c := range cons {
			select {
			case <-u.stop:
				return
			default:
			}
			switch {
			case c.Name == e.o.OwnerID:
				if c.Pending > 0 {
					u.retryOwn(l)
				}
			case live[c.Name]:
			default:
				if c.Pending > 0 && !u.claimFrom(l, c.Name) {
					continue
				}
				u.deleteConsumer(l, c.Name)
			}
		}
	}
}

// claimFrom claims and processes the entries a dead consumer left pending
// on lane; false when some stay (not idle long enough, or an error).
func (u *unfenced) claimFrom(lane, from string) bool {
	e := u.e
	for {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		ids, err := rdb.PendingIDs(ctx, e.c, lane, u.group, from, e.o.LeaseTTL, "-", 100)
		cancel()
		if err != nil {
			e.log.Warn("seqby: listing a dead consumer's entries failed", "handler", u.group, "stream", lane, "consumer", from, "err", err)
			return false
		}
		if len(ids) == 0 {
			return true // or all younger than LeaseTTL: the delete keeps it
		}
		ctx, cancel = context.WithTimeout(u.base, 5*time.Second)
		// MinIdle again: if the consumer came back and read one, it keeps it.
		msgs, err := rdb.Claim(ctx, e.c, lane, u.group, e.o.OwnerID, e.o.LeaseTTL, ids)
		cancel()
		if err != nil {
			e.log.Warn("seqby: claiming a dead consumer's entries failed", "handler", u.group, "stream", lane, "consumer", from, "err", err)
			return false
		}
		e.log.Info("seqby: claimed entries of a dead consumer", "handler", u.group, "stream", lane, "consumer", from, "entries", len(msgs))
		for _, m := range msgs {
			select {
			case <-u.stop:
				return false
			default:
			}
			u.process(m)
		}
		if len(ids) < 100 {
			return true
		}
	}
}

// retryOwn re-runs this consumer's own pending entries idle at least
// LeaseTTL that it did not halt on: an ack that failed after the handler
// succeeded. Each lane has a single worker per instance, so nothing of
// its own is in flight while it runs this.
func (u *unfenced) retryOwn(lane string) {
	e := u.e
	start := "-"
	for page := 0; page < 10; page++ {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		pend, err := rdb.PendingIDs(ctx, e.c, lane, u.group, e.o.OwnerID, e.o.LeaseTTL, start, 100)
		cancel()
		if err != nil || len(pend) == 0 {
			return
		}
		var ids []string
		for _, id := range pend {
			if !u.st.isHalted(lane, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			ctx, cancel = context.WithTimeout(u.base, 5*time.Second)
			msgs, err := rdb.Claim(ctx, e.c, lane, u.group, e.o.OwnerID, e.o.LeaseTTL, ids)
			cancel()
			if err != nil {
				return
			}
			for _, m := range msgs {
				u.process(m)
			}
		}
		if len(pend) < 100 {
			return
		}
		start = "(" + pend[len(pend)-1]
	}
}

// deleteConsumer removes a dead consumer with nothing pending from the
// group (atomically: it is kept if it has anything pending by then).
func (u *unfenced) deleteConsumer(lane, name string) {
	ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
	defer cancel()
	deleted, err := rdb.DeleteIdleConsumer(ctx, u.e.c, lane, u.group, name)
	if err != nil {
		u.e.log.Warn("seqby: deleting a dead consumer failed", "handler", u.group, "stream", lane, "consumer", name, "err", err)
		return
	}
	if deleted {
		u.e.log.Debug("seqby: deleted a dead consumer", "handler", u.group, "stream", lane, "consumer", name)
	}
}

// process handles one entry. After exhausted retries it stays pending on
// this consumer and the worker moves on (no order promised): the halt is
// reported once, and this instance never runs the entry again.
func (u *unfenced) process(en rdb.Entry) {
	e := u.e
	if u.st.isHalted(en.Stream, en.ID) {
		return
	}
	began := time.Now()
	out, h := e.exec.Handle(u.base, u.stop, e.exec.Slots(), u.c.reg.Name, u.c.category, en, false)
	e.countSettled(u.c.reg, u.c.category, out)
	switch out {
	case executor.OutDone, executor.OutSkip:
		if !u.replicated(en, began) {
			return // pending: it runs again, here or elsewhere
		}
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		if err := rdb.Ack(ctx, e.c, en.Stream, u.group, en.ID); err != nil {
			e.log.Warn("seqby: ack failed; the entry will be re-run", "handler", u.group, "stream", en.Stream, "entry", en.ID, "err", err)
		} else {
			u.trims.acked()
		}
		cancel()
	case executor.OutHalt:
		h.Key = u.key
		// An entry left for another build is decided again at the next
		// retry of this consumer's pending entries: once no live build
		// routes its type, this build's own rule applies.
		if !errors.Is(h.Err, ErrRoutedByAnotherBuild) {
			u.st.markHalted(en.Stream, en.ID)
		}
		if e.noteUnkeyedHalt(Halt(*h)) {
			e.reportUnkeyedHalt(Halt(*h))
		}
	}
}

// noteUnkeyedHalt adds h to the halts in Status unless the same entry of
// the same handler is already there; false when it was.
func (e *Engine) noteUnkeyedHalt(h Halt) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range e.halts {
		if o.Handler == h.Handler && o.Stream == h.Stream && o.EntryID == h.EntryID {
			return false
		}
	}
	e.halts = append(e.halts, h)
	if len(e.halts) > maxHalts {
		e.halts = e.halts[len(e.halts)-maxHalts:]
	}
	return true
}

// reportUnkeyedHalt logs an unkeyed halt and alerts OnHalt. Unlike a
// partition's halt nothing waits behind it.
func (e *Engine) reportUnkeyedHalt(h Halt) {
	e.log.Error("seqby: message left pending after its retries; the handler moves on (unkeyed: nothing waits behind it). It is not re-run by this instance; XACK it once handled, or another instance retries it after this one stops",
		"handler", h.Handler, "category", h.Category, "key", h.Key, "stream", h.Stream,
		"entry", h.EntryID, "type", h.MessageType, "reason", h.Reason, "err", h.Err)
	e.alert(h)
}

// ensureGroup creates group on stream from id 0 (with MKSTREAM when mk);
// false when the group does not exist (a lane without entries yet, or a
// failure, logged).
func (e *Engine) ensureGroup(base context.Context, stop <-chan struct{}, stream, group string, mk bool) bool {
	ok, err := e.createGroup(base, stream, group, mk)
	if err != nil {
		e.log.Warn("seqby: creating consumer group failed", "handler", group, "stream", stream, "err", err)
	}
	return ok
}

// createGroup creates group on stream from id 0 (with MKSTREAM when mk).
// It reports whether the group exists now; without mk, a stream that does
// not exist yet is (false, nil): the group is created when it does.
func (e *Engine) createGroup(base context.Context, stream, group string, mk bool) (bool, error) {
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	return rdb.CreateGroup(ctx, e.c, stream, group, mk)
}

// maxHalts bounds the unpartitioned halts kept for Status.
const maxHalts = 100

// sleepOr waits d unless stop closes first; false when stopped.
func sleepOr(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// replicated, in the strict mode, waits until what en's handler committed
// through the engine's client is on Options.ReplicaAcks replicas of the
// primary it began on, so an ack answered by a new primary never stands
// for a commit the old one took with it. False: do not ack (a new
// primary, or no acknowledgement within LeaseTTL), and the entry runs
// again.
func (u *unfenced) replicated(en rdb.Entry, began time.Time) bool {
	b := u.e.replicas
	if b == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(u.base, u.e.o.LeaseTTL)
	defer cancel()
	if _, err := b.Await(ctx, b.SlotOf(en.Stream), began, time.Now(), nil, nil); err != nil {
		u.e.log.Warn("seqby: not acking an entry whose effects are not confirmed on replicas; it runs again", "handler", u.group, "stream", en.Stream, "entry", en.ID, "err", err)
		return false
	}
	return true
}
