package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Unkeyed handlers promise no order, so they need no lease: instances
// share one consumer group per stream and Redis balances by message.
// Entries left pending by a dead instance are claimed after LeaseTTL idle.

// runPlain consumes an unpartitioned category's stream {category}.
func (e *Engine) runPlain(base context.Context, stop <-chan struct{}, c consumer) {
	stream, group := c.category, c.reg.Name
	for !e.ensureGroup(base, stop, stream, group, true) {
		if !sleepOr(stop, e.o.RetryBackoff) {
			return
		}
	}
	u := unfenced{e: e, base: base, stop: stop, c: c, group: group, lanes: []string{stream}}
	u.drainPending()
	lastClaim := time.Now()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if time.Since(lastClaim) > e.o.DiscoveryInterval {
			u.claimStale()
			lastClaim = time.Now()
		}
		ctx, cancel := context.WithTimeout(base, e.o.BlockTimeout+5*time.Second)
		res, err := e.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: e.o.OwnerID,
			Streams: []string{stream, ">"}, Count: 1, Block: e.o.BlockTimeout}).Result()
		cancel()
		if err != nil {
			if errors.Is(err, redis.Nil) {
				continue
			}
			if isNoGroup(err) {
				e.ensureGroup(base, stop, stream, group, true)
				continue
			}
			e.log.Warn("seqby: read failed; retrying", "stream", stream, "err", err)
			if !sleepOr(stop, e.o.RetryBackoff) {
				return
			}
			continue
		}
		for _, s := range res {
			for _, m := range s.Messages {
				u.process(s.Stream, m)
			}
		}
	}
}

// startFans starts a worker for every partition of a category that an
// unkeyed handler does not read yet; found through the index.
func (e *Engine) startFans(base context.Context, stop <-chan struct{}, c consumer, running map[string]bool, wg *sync.WaitGroup) {
	ctx, cancel := context.WithTimeout(base, max(e.o.DiscoveryInterval, time.Second))
	keys, err := e.c.SMembers(ctx, IndexKey(c.category)).Result()
	cancel()
	if err != nil {
		e.log.Warn("seqby: reading the partition index failed", "category", c.category, "err", err)
		return
	}
	for _, k := range keys {
		id := partitionID(c.reg.Name, PartitionStream(c.category, k))
		if running[id] || CheckKeySuffix(c.category, "", k, e.o.BackfillSuffix) != nil {
			continue
		}
		running[id] = true
		u := &unfenced{e: e, base: base, stop: stop, c: c, group: c.reg.Name, key: k,
			lanes: []string{PartitionStream(c.category, k), BackfillStream(c.category, k, e.o.BackfillSuffix)}}
		wg.Add(1)
		go func() { defer wg.Done(); u.runFan() }()
	}
}

type unfenced struct {
	e     *Engine
	base  context.Context
	stop  <-chan struct{}
	c     consumer
	group string
	key   string
	lanes []string
}

// runFan reads one partition's lanes in an unkeyed handler's group.
func (u *unfenced) runFan() {
	e := u.e
	for _, l := range u.lanes {
		u.e.ensureGroup(u.base, u.stop, l, u.group, false)
	}
	u.claimStale()
	u.drainPending()
	for {
		select {
		case <-u.stop:
			return
		default:
		}
		seq := e.wake.mark(u.c.category, u.key)
		got := false
		for _, l := range u.lanes {
			ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
			res, err := e.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: u.group, Consumer: e.o.OwnerID,
				Streams: []string{l, ">"}, Count: 1, Block: -1}).Result()
			cancel()
			if isNoGroup(err) {
				e.ensureGroup(u.base, u.stop, l, u.group, false)
				continue
			}
			if err != nil && !errors.Is(err, redis.Nil) {
				e.log.Warn("seqby: read failed; retrying", "stream", l, "err", err)
				continue
			}
			for _, s := range res {
				for _, m := range s.Messages {
					got = true
					u.process(s.Stream, m)
				}
			}
			if got {
				break
			}
		}
		if got {
			continue
		}
		select {
		case <-e.wake.wait(u.c.category, u.key, seq):
		case <-u.stop:
			return
		case <-time.After(idleRecheck):
			u.claimStale()
		}
	}
}

// drainPending processes this consumer's own pending entries (left by a
// restart under the same name) before new ones.
func (u *unfenced) drainPending() {
	for _, l := range u.lanes {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		res, err := u.e.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: u.group, Consumer: u.e.o.OwnerID,
			Streams: []string{l, "0"}, Count: 100, Block: -1}).Result()
		cancel()
		if err != nil {
			continue
		}
		for _, s := range res {
			for _, m := range s.Messages {
				u.process(s.Stream, m)
			}
		}
	}
}

// claimStale takes over entries pending longer than LeaseTTL (their
// consumer is presumably dead) and processes them.
func (u *unfenced) claimStale() {
	for _, l := range u.lanes {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		msgs, _, err := u.e.c.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: l, Group: u.group,
			Consumer: u.e.o.OwnerID, MinIdle: u.e.o.LeaseTTL, Start: "0-0", Count: 100}).Result()
		cancel()
		if err != nil {
			continue
		}
		for _, m := range msgs {
			u.process(l, m)
		}
	}
}

// process handles one entry; after exhausted retries it stays pending and
// is surfaced as a halt, and the consumer moves on (no order promised).
func (u *unfenced) process(stream string, m redis.XMessage) {
	e := u.e
	en := Entry{Stream: stream, ID: m.ID}
	if m.Values != nil {
		en.Fields = make(map[string]string, len(m.Values))
		for k, v := range m.Values {
			s, _ := v.(string)
			en.Fields[k] = s
		}
	}
	out, h := e.handle(u.base, u.stop, u.c.reg, u.c.category, en)
	switch out {
	case outDone:
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		if err := e.c.XAck(ctx, stream, u.group, m.ID).Err(); err != nil {
			e.log.Warn("seqby: ack failed; the entry will be redelivered", "stream", stream, "entry", m.ID, "err", err)
		}
		cancel()
	case outHalt:
		h.Key = u.key
		e.mu.Lock()
		e.halts = append(e.halts, *h)
		if len(e.halts) > maxHalts {
			e.halts = e.halts[len(e.halts)-maxHalts:]
		}
		e.mu.Unlock()
		e.reportHalt(*h)
	}
}

// ensureGroup creates group on stream from id 0 (with MKSTREAM when mk).
func (e *Engine) ensureGroup(base context.Context, stop <-chan struct{}, stream, group string, mk bool) bool {
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	var err error
	if mk {
		err = e.c.XGroupCreateMkStream(ctx, stream, group, "0").Err()
	} else {
		err = e.c.XGroupCreate(ctx, stream, group, "0").Err()
	}
	if err == nil || strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return true
	}
	if !mk && strings.Contains(err.Error(), "requires the key to exist") {
		return false // the lane has no entries yet; created when it does
	}
	e.log.Warn("seqby: creating consumer group failed", "stream", stream, "group", group, "err", err)
	return false
}

// maxHalts bounds the unpartitioned halts kept for Status.
const maxHalts = 100

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

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
