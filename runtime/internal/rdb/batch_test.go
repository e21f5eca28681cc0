package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// Many workers, each on its own partition (its own slot on a cluster),
// read and ack through one Batcher at once: each gets its own partition's
// entries in order, each call fenced by its own lease, and a script cache
// the server lost (SCRIPT FLUSH) halfway costs nothing but a reload.
func TestBatcherSharesRoundTrips(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		const workers, events = 40, 30
		b := NewBatcher(c)
		leases := make([]Lease, workers)
		for w := range workers {
			var values []any
			for i := range events {
				values = append(values, i)
			}
			leases[w], _ = ownedStream(ctx, t, c, fmt.Sprint("k", w), values...)
		}
		var flushed sync.Once
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lanes := []string{PartitionStream("order", fmt.Sprint("k", w))}
				var ack []Entry
				next := 0
				for {
					es, _, err := b.ReadAhead(ctx, leases[w], "h", lanes, 4, ack, ReadFlags{Urgent: w%2 == 0})
					if err != nil {
						errs <- err
						return
					}
					if len(es) == 0 {
						break
					}
					for i, e := range es {
						if e.Fields["n"] != fmt.Sprint(next) {
							errs <- fmt.Errorf("worker %d read %v, want n=%d", w, e.Fields, next)
							return
						}
						next++
						if i < len(es)-1 {
							if err := b.Ack(ctx, leases[w], "h", e.Stream, e.ID, w%3 == 0); err != nil {
								errs <- err
								return
							}
						}
						ack = es[i : i+1]
					}
					if next == events/2 {
						flushed.Do(func() {
							for _, err := range []error{flushScripts(ctx, c)} {
								if err != nil {
									errs <- err
								}
							}
						})
					}
				}
				if ack != nil {
					if err := b.Ack(ctx, leases[w], "h", ack[0].Stream, ack[0].ID, false); err != nil {
						errs <- err
						return
					}
				}
				if next != events {
					errs <- fmt.Errorf("worker %d read %d entries, want %d", w, next, events)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// Each call is fenced by its own lease.
		stale := leases[0]
		stale.Generation--
		if err := b.Ack(ctx, stale, "h", PartitionStream("order", "k0"), "1-0", false); !errors.Is(err, ErrFenced) {
			t.Errorf("a stale ack through the Batcher: %v, want ErrFenced", err)
		}
	})
}

// flushScripts empties every server's script cache.
func flushScripts(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return s.ScriptFlush(ctx).Err() })
	}
	return c.ScriptFlush(ctx).Err()
}

// A caller whose context ends stops waiting, even while the pipeline that
// carries its call is stuck behind a server busy in a script.
func TestBatcherCallerContext(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	b := NewBatcher(c)
	l, err := Acquire(ctx, c, PartitionLease("order:{k}", "h"), "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		other := redis.NewClient(&redis.Options{Addr: c.Options().Addr, ReadTimeout: 10 * time.Second})
		defer other.Close()
		other.Eval(context.Background(), "local t = redis.call('TIME'); while true do local n = redis.call('TIME'); if (n[1] - t[1]) * 1000000 + n[2] - t[2] > 2000000 then return 1 end end", nil)
	}()
	probe := redis.NewClient(&redis.Options{Addr: c.Options().Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer probe.Close()
	eventually(t, 10*time.Second, "the server busy in the script", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return probe.Ping(pctx).Err() != nil
	})
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := b.Ack(cctx, l, "h", "order:{k}", "1-0", false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ack with an ended context: %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-busy:
		t.Fatal("the server was free again before the call returned: the caller waited for the pipeline, not for its context")
	default:
	}
	<-busy
}

// Calls that queue while the pipelines are in flight go as rounds: many
// partitions' calls share one script call, each slice still fenced by its
// own lease (a stale one fails alone).
func TestBatcherRoundsShareScriptCalls(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if err := LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	b := NewBatcher(c)
	const calls = 80
	leases := make([]Lease, calls)
	for i := range calls {
		leases[i], _ = ownedStream(ctx, t, c, fmt.Sprint("r", i), i)
	}
	stale := map[int]bool{7: true, 40: true, 79: true}
	for i := range stale {
		leases[i].Generation++ // a token the lease does not hold
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The first pipelines wait until every other call is queued.
	queued := make(chan struct{})
	var held atomic.Int64
	b.beforeSend = func(batch []*batchCall) {
		held.Add(int64(len(batch)))
		<-queued
	}
	type result struct {
		i   int
		es  []Entry
		err error
	}
	results := make(chan result, calls)
	for i := range calls {
		go func() {
			stream := PartitionStream("order", fmt.Sprint("r", i))
			es, _, err := b.ReadAhead(ctx, leases[i], "h", []string{stream}, 4, nil, ReadFlags{Urgent: i%5 == 0})
			results <- result{i, es, err}
		}()
	}
	eventually(t, 10*time.Second, "every call queued", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return held.Load()+int64(len(b.urgent)+len(b.queue)) == calls
	})
	close(queued)
	for range calls {
		r := <-results
		switch {
		case stale[r.i] && !errors.Is(r.err, ErrFenced):
			t.Errorf("call %d under a stale lease: %v, want ErrFenced", r.i, r.err)
		case !stale[r.i] && (r.err != nil || len(r.es) != 1 || r.es[0].Fields["n"] != fmt.Sprint(r.i)):
			t.Errorf("call %d: %+v %v, want its own entry", r.i, r.es, r.err)
		}
	}
	// Each of the flushers' first batches went in rounds of up to
	// RoundMaxSlices, and the rest, queued meanwhile, too.
	want := maxFlushers + (calls+RoundMaxSlices-1)/RoundMaxSlices
	if n := scriptCalls(ctx, t, c); n > int64(want) {
		t.Errorf("%d script calls for %d reads, want at most %d", n, calls, want)
	}
}

// scriptCalls is how many EVALSHA and EVAL calls c's server ran since its
// statistics were reset.
func scriptCalls(ctx context.Context, t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				v, _, _ := strings.Cut(rest, ",")
				m, _ := strconv.ParseInt(v, 10, 64)
				n += m
			}
		}
	}
	return n
}

// On a cluster a round goes to the node the client maps its slices to.
// When a slot has moved since, the call comes back MOVED (its first
// slice moved: nothing was done) or the moved slice alone ErrNotLocal,
// and the calls go again one slice each through the cluster client: every
// call gets its own answer.
func TestBatcherClusterSlotMoved(t *testing.T) {
	ctx := ctxT(t)
	cl := redistest.NewCluster(t, 3)
	for _, movedFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("moved first ", movedFirst), func(t *testing.T) {
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { cc.Close() })
			prefix := "s"
			if movedFirst {
				prefix = "m"
			}
			tags := roundClusterTags(ctx, t, cc, cl, prefix, 3)
			var calls []*batchCall
			for _, tag := range tags {
				rc, _ := roundPartition(ctx, t, cc, tag, 2)
				calls = append(calls, &batchCall{s: readSlice(rc), done: make(chan struct{}, 1)})
			}
			// The client has mapped every slot (node 0 serves all three);
			// then one slot moves behind its back.
			moved := 0
			if !movedFirst {
				moved = 2
			}
			if _, err := cl.MoveSlot(ctx, calls[moved].s.Lease.Ref.Key, 1); err != nil {
				t.Fatal(err)
			}
			b := NewBatcher(cc)
			b.send(calls)
			for i, call := range calls {
				if call.err != nil || call.res.Err != nil || len(call.res.Entries) != 1 || call.res.Entries[0].Fields["n"] != "0" {
					t.Errorf("call %d: %+v %v, want its partition's first entry", i, call.res, call.err)
				}
			}
		})
	}
}

// AckEntries acks several entries of one lane in one fenced call (the
// batched mode's acks), refuses entries of two lanes before sending
// anything, and is fenced by the lease like a single ack.
func TestBatcherAckEntries(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	b := NewBatcher(c)
	l, stream := ownedStream(ctx, t, c, "multi", 0, 1, 2, 3, 4)
	es, _, err := b.ReadAhead(ctx, l, "h", []string{stream}, 5, nil, ReadFlags{})
	if err != nil || len(es) != 5 {
		t.Fatalf("read: %v %v", es, err)
	}
	mixed := []Entry{es[0], {Stream: BackfillStream("order", "multi", "backfill"), ID: "1-0"}}
	if err := b.AckEntries(ctx, l, "h", mixed, false); err == nil {
		t.Fatal("acking entries of two lanes in one call succeeded; want a refusal")
	}
	stale := l
	stale.Generation++
	if err := b.AckEntries(ctx, stale, "h", es[:3], false); !errors.Is(err, ErrFenced) {
		t.Fatalf("acks under a stale lease: %v, want ErrFenced", err)
	}
	if err := b.AckEntries(ctx, l, "h", es[:3], true); err != nil {
		t.Fatal(err)
	}
	if err := FencedAckEntries(ctx, c, l, "h", es[3:4]); err != nil {
		t.Fatal(err)
	}
	p, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: "h", Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 1 || p[0].ID != es[4].ID {
		t.Fatalf("pending after acking four of five: %+v %v, want only the fifth", p, err)
	}
}

// A round Redis refuses whole for one slice's sake (an ACL that denies
// one partition's keys) goes again one slice per round: the refusal is
// that slice's alone, and the others are answered.
func TestBatcherOneSliceRefused(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	var calls []*batchCall
	for _, key := range []string{"ok1", "denied", "ok2"} {
		l, stream := ownedStream(ctx, t, c, key, key)
		calls = append(calls, &batchCall{s: RoundSlice{Op: RoundRead, Lease: l, Group: "h", Lanes: []string{stream}, N: 1}, done: make(chan struct{}, 1)})
	}
	if err := c.Do(ctx, "ACL", "SETUSER", "part", "on", ">pw", "~order:{ok*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	u := redis.NewClient(&redis.Options{Addr: c.Options().Addr, Username: "part", Password: "pw"})
	t.Cleanup(func() { u.Close() })
	if err := LoadScripts(ctx, u); err != nil {
		t.Fatal(err)
	}
	NewBatcher(u).send(calls)
	for i, cl := range calls {
		denied := i == 1
		switch {
		case denied && (cl.err == nil || !Permanent(cl.err) || !strings.Contains(cl.err.Error(), "NOPERM")):
			t.Errorf("the denied partition's call: %+v %v, want its own NOPERM", cl.res, cl.err)
		case !denied && (cl.err != nil || cl.res.Err != nil || len(cl.res.Entries) != 1):
			t.Errorf("call %d: %+v %v, want its entry", i, cl.res, cl.err)
		}
	}
}

// Urgent calls take at most maxUrgent of a batch while other calls wait,
// so a steady flow of them never holds the others back; with none
// waiting they take it all.
func TestBatcherTakeBoundsUrgent(t *testing.T) {
	b := &Batcher{}
	for range 2 * maxBatch {
		b.urgent = append(b.urgent, &batchCall{})
	}
	for range 10 {
		b.queue = append(b.queue, &batchCall{})
	}
	batch := b.take(nil)
	if len(batch) != maxUrgent+10 || len(b.queue) != 0 || len(b.urgent) != 2*maxBatch-maxUrgent {
		t.Fatalf("took %d (left %d urgent, %d other), want %d urgent and the 10 others", len(batch), len(b.urgent), len(b.queue), maxUrgent)
	}
	if batch = b.take(batch[:0]); len(batch) != maxBatch {
		t.Fatalf("with no other call waiting, took %d, want %d", len(batch), maxBatch)
	}
}

// A pm's read over more lanes than a round holds (64 categories or more)
// goes as read_oldest.lua alone instead of failing for good.
func TestBatcherReadOldestManyLanes(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	var lanes []string
	for i := range RoundMaxKeys {
		lanes = append(lanes, PartitionStream(fmt.Sprint("cat", i), "v"))
	}
	id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: lanes[70], Values: []any{"n", "x"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(ctx, c, PartitionLease(lanes[0], "pm"), "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Reclaim(ctx, c, l, "pm", lanes); err != nil {
		t.Fatal(err)
	}
	en, ok, err := NewBatcher(c).ReadOldest(ctx, l, "pm", lanes, len(lanes), nil)
	if err != nil || !ok || en.ID != id {
		t.Fatalf("read over %d lanes: %+v %v %v, want %s", len(lanes), en, ok, err, id)
	}
}

// ownedStream appends an entry {n: v} to key's partition stream of
// category order for each of values, and leases the partition for
// consumer group h (the group created by the reclaim).
func ownedStream(ctx context.Context, t *testing.T, c redis.UniversalClient, key string, values ...any) (Lease, string) {
	t.Helper()
	stream := PartitionStream("order", key)
	for _, v := range values {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"n", v}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Acquire(ctx, c, PartitionLease(stream, "h"), "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Reclaim(ctx, c, l, "h", []string{stream}); err != nil {
		t.Fatal(err)
	}
	return l, stream
}
