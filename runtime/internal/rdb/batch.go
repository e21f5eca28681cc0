package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batcher carries the fenced reads, acks and lease checks of many
// partitions in rounds: one round.lua call holds up to RoundMaxSlices
// partitions' calls, each a slice checked against its own lease, so Redis
// pays a script invocation per round instead of one per event, and the
// engine a command to encode and a reply to decode per round. A
// partition's promise does not change: its worker waits for the reply of
// its ack before it runs the next entry (unless its handler is batched,
// Registration.AckBatch), and a slice whose lease fails is
// fenced alone (the others in the round go on). The rounds of every worker
// waiting at the same moment share a pipeline (up to maxBatch slices a
// pipeline, maxFlushers pipelines in flight).
//
// On a Redis Cluster a round holds slices of one node (round.lua's
// allow-cross-slot-keys variant) and is sent to that node's client
// directly; a round refused because its routing slot moved (MOVED, ASK,
// TRYAGAIN, CROSSSLOT, CLUSTERDOWN) and a slice whose keys are not on that
// node (ErrNotLocal) go again one slice per call through the cluster
// client, which follows the redirection, as the single scripts do.
//
// No goroutine lives longer than the calls: a call that finds fewer than
// maxFlushers pipelines in flight starts one more flusher, which sends the
// queue, and what queued meanwhile, and ends when the queue is empty. So
// calls never wait for a timer, the Batcher needs no start or stop, and a
// caller whose context ends stops waiting at once.
type Batcher struct {
	c       redis.UniversalClient
	cluster *redis.ClusterClient // nil on a single Redis

	mu sync.Mutex
	// urgent is served before queue: the calls of partitions with a
	// backlog deeper than one read (see Urgent), so a hot key's round
	// trip does not wait behind every cold partition's.
	urgent   []*batchCall
	queue    []*batchCall
	flushers int

	// beforeSend, when set (tests), is called by a flusher with each
	// batch before sending it.
	beforeSend func(batch []*batchCall)
}

// NewBatcher returns a Batcher sending on c.
func NewBatcher(c redis.UniversalClient) *Batcher {
	cc, _ := c.(*redis.ClusterClient)
	return &Batcher{c: c, cluster: cc}
}

// maxFlushers bounds the pipelines one Batcher has in flight: more than
// one keeps the server busy while a reply travels back; a few are enough,
// since every call waiting meanwhile joins the next pipeline (measured on
// 2 cores: 2 in flight made fuller rounds but a slower 64-key run than 4).
const maxFlushers = 4

// maxBatch bounds the slices one pipeline carries (RoundMaxSlices per
// round), so the Redis time of one pipeline, which every call of the next
// one waits for, stays a fraction of a millisecond, and a reply is parsed
// and its workers released before the whole queue of a large instance is
// through.
const maxBatch = 4 * RoundMaxSlices

// batchTimeout bounds one pipeline, whatever the client's own timeouts:
// a caller whose context ends first stops waiting, but the pipeline is
// sent on a goroutine that must end too.
const batchTimeout = 30 * time.Second

// batchCall is one partition's call waiting for its round.
type batchCall struct {
	s    RoundSlice
	res  RoundResult
	err  error // the round's own failure (network, a refused call)
	done chan struct{}
	// lua: the slice goes as round.lua's, not as plain commands: their
	// answer was not a clean one (plain.go); delivered are the entries
	// their read delivered, whose delivery goes back (giveBack: before
	// a read's round.lua, after a read-new's that handed nothing back).
	lua       bool
	delivered []string
}

var callPool = sync.Pool{New: func() any { return &batchCall{done: make(chan struct{}, 1)} }}

// run sends s in the next round and returns its result. urgent: the
// partition has more waiting than one read returns, so its call goes
// before the others queued.
func (b *Batcher) run(ctx context.Context, s RoundSlice, urgent bool) (RoundResult, error) {
	return b.wait(ctx, b.start(s, urgent))
}

// start queues s for the next round; wait returns its result.
func (b *Batcher) start(s RoundSlice, urgent bool) *batchCall {
	cl := callPool.Get().(*batchCall)
	cl.s = s
	b.mu.Lock()
	if urgent {
		b.urgent = append(b.urgent, cl)
	} else {
		b.queue = append(b.queue, cl)
	}
	lead := b.flushers < maxFlushers
	if lead {
		b.flushers++
	}
	b.mu.Unlock()
	if lead {
		go b.flush()
	}
	return cl
}

// wait returns the result of cl, which start queued, or ctx's error when
// it ends first.
func (b *Batcher) wait(ctx context.Context, cl *batchCall) (RoundResult, error) {
	select {
	case <-cl.done:
		r, err := cl.res, cl.err
		*cl = batchCall{done: cl.done}
		callPool.Put(cl)
		return r, err
	case <-ctx.Done():
		// The call may still run (as a call whose reply was lost may):
		// the callers' protocol already copes with that. cl is not put
		// back: the flusher still answers it.
		return RoundResult{}, ctx.Err()
	}
}

// flush sends queued calls until the queue is empty.
func (b *Batcher) flush() {
	var batch []*batchCall
	for {
		b.mu.Lock()
		batch = b.take(batch[:0])
		if len(batch) == 0 {
			b.flushers--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if b.beforeSend != nil {
			b.beforeSend(batch)
		}
		b.send(batch)
		clear(batch)
	}
}

// take moves up to maxBatch calls, urgent ones first, from the queues to
// batch: urgent calls take at most maxUrgent of it while other calls wait,
// so a steady flow of urgent calls (deep partitions, verifies) never holds
// the others back for good. b.mu is held.
func (b *Batcher) take(batch []*batchCall) []*batchCall {
	limit := maxBatch
	if len(b.queue) > 0 {
		limit = maxUrgent
	}
	batch = takeFrom(&b.urgent, batch, limit)
	return takeFrom(&b.queue, batch, maxBatch)
}

// maxUrgent is the share of a batch urgent calls take while other calls
// wait.
const maxUrgent = maxBatch * 3 / 4

// takeFrom moves calls from the head of *q to batch until batch holds
// limit calls or *q is empty.
func takeFrom(q *[]*batchCall, batch []*batchCall, limit int) []*batchCall {
	n := max(0, min(len(*q), limit-len(batch)))
	batch = append(batch, (*q)[:n]...)
	rest := (*q)[n:]
	if len(rest) == 0 {
		clear((*q)[:n])
		rest = (*q)[:0]
		if cap(rest) > 4*maxBatch {
			rest = nil // let a backlog's large array go
		}
	} else {
		// Keep the queue's head at the array's start, so appends reuse
		// it instead of growing a new one.
		rest = (*q)[:copy(*q, rest)]
		clear((*q)[len(rest) : len(rest)+n])
	}
	*q = rest
	return batch
}

// send runs batch as rounds in one pipeline per node and answers every
// call.
func (b *Batcher) send(batch []*batchCall) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	if b.cluster == nil {
		if alone := b.sendNode(ctx, b.c, scriptRound, batch, false); len(alone) > 0 {
			b.sendNode(ctx, b.c, scriptRound, alone, true)
		}
	} else {
		b.sendCluster(ctx, batch)
	}
	for _, cl := range batch {
		cl.done <- struct{}{}
	}
}

// sendCluster groups batch by the node serving each slice's slot, as the
// cluster client last mapped them, and sends each group to its node.
func (b *Batcher) sendCluster(ctx context.Context, batch []*batchCall) {
	type group struct {
		node  *redis.Client
		calls []*batchCall
	}
	var groups []group
	var retry []*batchCall
	for _, cl := range batch {
		node, err := b.cluster.MasterForKey(ctx, cl.s.Lease.Ref.Key)
		if err != nil {
			retry = append(retry, cl)
			continue
		}
		i := 0
		for i < len(groups) && groups[i].node != node {
			i++
		}
		if i == len(groups) {
			groups = append(groups, group{node: node})
		}
		groups[i].calls = append(groups[i].calls, cl)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Go(func() {
			alone := b.sendNode(ctx, g.node, scriptRoundCrossSlot, g.calls, false)
			mu.Lock()
			retry = append(retry, alone...)
			mu.Unlock()
		})
	}
	wg.Wait()
	reload := false
	for _, g := range groups {
		for _, cl := range g.calls {
			if movedAway(cl) {
				reload = true
				retry = append(retry, cl)
			}
		}
	}
	if reload {
		// Sent to a node's own client, a refusal does not reach the
		// cluster client, which reloads its map of the slots on such
		// replies: ask it to now.
		b.cluster.ReloadState(ctx)
	}
	// One slice per call through the cluster client: it routes each by
	// its slot and follows MOVED and ASK, as for the single scripts.
	var rw sync.WaitGroup
	for _, cl := range retry {
		cl.res, cl.err = RoundResult{}, nil
		rw.Go(func() { b.sendOne(ctx, cl) })
	}
	rw.Wait()
}

// movedAway reports a cluster call that reached a node that does not
// serve its slice now (or no longer as a master): nothing of it was done,
// it can go again.
func movedAway(cl *batchCall) bool {
	if cl.err != nil {
		return IsMoved(cl.err) || IsCrossSlot(cl.err) || hasPrefix(cl.err, "CLUSTERDOWN") || hasPrefix(cl.err, "READONLY")
	}
	return errors.Is(cl.res.Err, ErrNotLocal)
}

// hasPrefix reports an error reply of Redis beginning with prefix.
func hasPrefix(err error, prefix string) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), prefix)
}

// sendOne runs one call's slice alone through the cluster client.
func (b *Batcher) sendOne(ctx context.Context, cl *batchCall) {
	rs, err := Round(ctx, b.c, []RoundSlice{cl.s})
	if err != nil {
		cl.err = err
		return
	}
	cl.res = rs[0]
}

// sendNode runs calls as rounds of script (alone: one slice per round),
// in one pipeline on c (a single Redis, or one cluster node's client),
// and stores each call's result or its round's error. It returns the
// calls of rounds of several slices that Redis refused whole before
// running them for a reason that may be one slice's own (an ACL refusing
// a key, say), to send again one slice per round, so that one
// partition's refusal is not charged to the others.
func (b *Batcher) sendNode(ctx context.Context, c redis.Cmdable, script *redis.Script, calls []*batchCall, alone bool) (again []*batchCall) {
	type round struct {
		calls  []*batchCall
		slices []RoundSlice
		keys   []string
		args   []any
		cmd    *redis.Cmd
	}
	cluster := b.cluster != nil
	type plainCall struct {
		cl   *batchCall
		cmds plainCmds
	}
	var plain []plainCall
	if !alone {
		lua := make([]*batchCall, 0, len(calls))
		for _, cl := range calls {
			if !cl.lua && plainOK(cl.s) {
				plain = append(plain, plainCall{cl: cl})
			} else {
				lua = append(lua, cl)
			}
		}
		calls = lua
	}
	var rounds []round
	for len(calls) > 0 {
		n := 1
		if !alone {
			n = roundSize(calls)
		}
		r := round{calls: calls[:n], slices: make([]RoundSlice, n)}
		for i, cl := range r.calls {
			r.slices[i] = cl.s
		}
		calls = calls[n:]
		keys, args, err := BuildRound(r.slices, cluster)
		if err != nil && n > 1 {
			// A defect in a slice (roundSize kept within the caps): each
			// call goes alone, so one malformed slice does not fail the
			// others.
			again = append(again, r.calls...)
			continue
		}
		if err != nil {
			r.calls[0].err = err
			continue
		}
		r.keys, r.args = keys, args
		rounds = append(rounds, r)
	}
	if len(rounds) == 0 && len(plain) == 0 {
		return again
	}
	pipe := c.Pipeline()
	if cluster {
		// go-redis sends a node's pipeline again whole when its first
		// command fails with a retryable reply (TRYAGAIN, CLUSTERDOWN):
		// a PING first keeps the rounds, which may have run, from going
		// twice for a reply of the first.
		pipe.Ping(ctx)
	}
	for _, r := range rounds {
		for _, cl := range r.calls {
			// Before a read's pending pass, which counts a delivery as it
			// hands them over (see giveBack; a read-new's, after it).
			if len(cl.delivered) > 0 && cl.s.Op == RoundRead {
				giveBack(ctx, pipe, cl.s, cl.delivered)
				cl.delivered = nil
			}
		}
	}
	for i := range plain {
		plain[i].cmds = queuePlain(ctx, pipe, plain[i].cl.s)
	}
	for i := range rounds {
		r := &rounds[i]
		r.cmd = script.EvalSha(ctx, pipe, r.keys, r.args...)
	}
	_, execErr := pipe.Exec(ctx)
	var re redis.Error
	if execErr != nil && !errors.As(execErr, &re) {
		// The connection failed: a round's own reply, if it has one, may
		// be from an earlier try of the pipeline, so none is trusted as
		// "not run" (moved) or split; every call gets the failure and its
		// caller tries again.
		err := fmt.Errorf("round pipeline of %d calls: %w", len(rounds)+len(plain), execErr)
		for _, r := range rounds {
			for _, cl := range r.calls {
				cl.err = err
			}
		}
		for _, p := range plain {
			p.cl.err = err
		}
		return again
	}
	// A slice whose plain commands gave no clean answer goes again as
	// round.lua's, on the same node, after this pipeline.
	var fallback []*batchCall
	for _, p := range plain {
		if r, ok, delivered := p.cmds.judge(p.cl.s); ok {
			p.cl.res = r
		} else {
			p.cl.lua, p.cl.delivered = true, delivered
			fallback = append(fallback, p.cl)
		}
	}
	if len(fallback) > 0 {
		defer func() {
			again = append(again, b.sendNode(ctx, c, script, fallback, false)...)
			giveBackUnseen(ctx, c, fallback)
		}()
	}
	for i := range rounds {
		r := &rounds[i]
		res, err := r.cmd.Result()
		// A pipeline has no EVAL fallback: a script cache the server
		// lost (a restart, SCRIPT FLUSH) costs this round one direct
		// round trip, which loads the script again.
		if IsNoScript(err) {
			res, err = script.Run(ctx, c, r.keys, r.args...).Result()
		}
		if err != nil && len(r.calls) > 1 && refusedWhole(err) {
			again = append(again, r.calls...)
			continue
		}
		if err != nil {
			err = fmt.Errorf("round of %d slices from %s: %w", len(r.slices), r.slices[0].Lease.Ref.Key, err)
			for _, cl := range r.calls {
				cl.err = err
			}
			continue
		}
		out, err := ParseRound(r.slices, res)
		for j, cl := range r.calls {
			if err != nil {
				cl.err = err
			} else {
				cl.res = out[j]
			}
		}
	}
	return again
}

// giveBackUnseen gives back the delivery of the entries a plain
// read-new delivered (see giveBack) when round.lua's read-new, which ran
// after it, did not hand them over (the partition paused, the lease
// fenced, a failure): the read that does later is a pending pass, which
// counts one. A read-new that did hand them over counted nothing, so
// their one delivery stands.
func giveBackUnseen(ctx context.Context, c redis.Cmdable, calls []*batchCall) {
	var pipe redis.Pipeliner
	for _, cl := range calls {
		if len(cl.delivered) == 0 || cl.s.Op != RoundReadNew {
			continue
		}
		if cl.err != nil || cl.res.Err != nil {
			if pipe == nil {
				pipe = c.Pipeline()
			}
			giveBack(ctx, pipe, cl.s, cl.delivered)
		}
		cl.delivered = nil
	}
	if pipe != nil {
		// At worst an entry keeps the delivery: one more toward
		// MaxDeliveries, as before the give-back.
		_, _ = pipe.Exec(ctx)
	}
}

// refusedWhole reports a round Redis refused before running it for a
// reason that may be one slice's alone: an ACL refusing a key or a
// command (NOPERM), or round.lua's refusal of a malformed call (an ERR
// reply beginning "ERR round:"), or on a single Redis a CROSSSLOT. A
// refusal that holds for every slice (a cluster slot moving, memory,
// a busy server) is not split.
func refusedWhole(err error) bool {
	return hasPrefix(err, "NOPERM") || hasPrefix(err, "ERR round:") || hasPrefix(err, "CROSSSLOT")
}

// roundSize is how many of calls, from the first, fit one round within
// the caps (at least one: BuildRound refuses a slice beyond them alone).
func roundSize(calls []*batchCall) int {
	nk, nids := 0, 0
	for i, cl := range calls {
		nk += 2 + len(cl.s.Lanes) // lease, pause mark, lanes (BuildRound)
		nids += len(cl.s.AckIDs)
		if i > 0 && (i == RoundMaxSlices || nk > RoundMaxKeys || nids > RoundMaxAckIDs) {
			return i
		}
	}
	return len(calls)
}
