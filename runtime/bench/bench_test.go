// Package bench measures the runtime against a private redis-server:
// publish throughput, end-to-end keyed throughput and its costs per
// event, latency at steady rates, claiming, idle cost and storage, seqby
// next to a plain consumer group where one compares. Run with make bench;
// results are written down in docs/benchmarks.md, never asserted in tests.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/examples/orders/events"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
)

func newClient(b testing.TB) *redis.Client {
	s := redistest.New(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkPublish publishes keyed events one at a time: index, entry and
// wake-up signal in one pipeline on a single Redis, one after the other on
// a three-master cluster (each step on its slot's node).
//
// Against plain XADD of the same payload on the same server: xadd one at a
// time, batch (PublishBatch of 100 messages over 64 keys) against
// xadd-pipelined (100 XADDs in a pipeline).
func BenchmarkPublish(b *testing.B) {
	b.Run("single", func(b *testing.B) { benchPublish(b, newClient(b)) })
	b.Run("xadd", func(b *testing.B) {
		c, ctx := newClient(b), context.Background()
		for i := 0; b.Loop(); i++ {
			if err := c.XAdd(ctx, plainXAdd(i)).Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	})
	b.Run("batch", func(b *testing.B) {
		c, ctx := newClient(b), context.Background()
		pub := runtime.NewPublisher(c, runtime.PublisherOptions{})
		msgs := make([]runtime.Message, 0, 100)
		n := 0
		for b.Loop() {
			msgs = msgs[:0]
			for range 100 {
				msgs = append(msgs, events.ItemAdded{ClientID: fmt.Sprintf("c-%d", n%64), Seq: n})
				n++
			}
			if err := pub.PublishBatch(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msg/s")
	})
	b.Run("xadd-pipelined", func(b *testing.B) {
		c, ctx := newClient(b), context.Background()
		n := 0
		for b.Loop() {
			pipe := c.Pipeline()
			for range 100 {
				pipe.XAdd(ctx, plainXAdd(n))
				n++
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msg/s")
	})
	b.Run("cluster", func(b *testing.B) {
		cl := redistest.NewCluster(b, 3)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
		b.Cleanup(func() { c.Close() })
		benchPublish(b, c)
	})
}

func benchPublish(b *testing.B, c redis.UniversalClient) {
	pub := runtime.NewPublisher(c, runtime.PublisherOptions{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := pub.Publish(ctx, events.ItemAdded{ClientID: fmt.Sprintf("c-%d", i%64), Seq: i}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

// plainConsumers runs the plain group's two consumers on stream until ctx
// ends (plainConsumer each).
func plainConsumers(ctx context.Context, c *redis.Client, stream, group string, each func(redis.XMessage)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			plainConsumer(ctx, c, stream, group, fmt.Sprint(i), each)
		}()
	}
	return &wg
}

// plainConsumer is one consumer of the plain group on stream until ctx
// ends: XREADGROUP COUNT 100 (blocking up to 100ms), each message to
// each, then one XACK of the batch.
func plainConsumer(ctx context.Context, c *redis.Client, stream, group, name string, each func(redis.XMessage)) {
	for ctx.Err() == nil {
		res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: name,
			Streams: []string{stream, ">"}, Count: 100, Block: 100 * time.Millisecond}).Result()
		if err != nil {
			continue
		}
		ids := make([]string, 0, len(res[0].Messages))
		for _, m := range res[0].Messages {
			each(m)
			ids = append(ids, m.ID)
		}
		c.XAck(ctx, stream, group, ids...)
	}
}

// plainXAdd is the XADD of a plain producer: the same payload, one stream.
func plainXAdd(i int) *redis.XAddArgs {
	ev, _ := runtime.JSON.Marshal(events.ItemAdded{ClientID: fmt.Sprintf("c-%d", i%64), Seq: i})
	return &redis.XAddArgs{Stream: "plain", Values: []any{"type", "ItemAdded", "payload", ev}}
}

// span is a count of applied events and when the first and the last of
// them were applied (Unix nanoseconds; zero before the first).
type span struct{ n, first, last int64 }

// merge is the span of s's and o's events together.
func (s span) merge(o span) span {
	if s.first == 0 || (o.first != 0 && o.first < s.first) {
		s.first = o.first
	}
	s.n, s.last = s.n+o.n, max(s.last, o.last)
	return s
}

// rate is events per second between the first and the last applied, so
// that a run's rate excludes the engines' start (discovery, claiming);
// zero before two events.
func (s span) rate() float64 {
	if s.last <= s.first {
		return 0
	}
	return float64(s.n) / time.Duration(s.last-s.first).Seconds()
}

// tally is a span counted as events are applied.
type tally struct{ n, first, last atomic.Int64 }

// add counts an event applied at now (Unix nanoseconds). The count goes
// last: whoever sees it has the times of the events it counts.
func (t *tally) add(now int64) {
	t.first.CompareAndSwap(0, now)
	t.last.Store(now)
	t.n.Add(1)
}

func (t *tally) span() span { return span{t.n.Load(), t.first.Load(), t.last.Load()} }

// counter is a keyed handler that counts what it applies, apart for its
// hotKey too, and, with lat set, records publish → handler start of the
// events with Seq >= 0 (the lower ones warm up).
type counter struct {
	tally
	hot    tally
	hotKey string
	lat    *latencies
}

func (h *counter) registration() runtime.Registration {
	return runtime.Registration{
		Name: "bench.counter", Kind: runtime.EventHandler, Key: "client_id", Sequential: true,
		Routes: []runtime.Route{{
			Category: "cart", Type: "ItemAdded", PartitionField: "client_id",
			Decode: func(c runtime.Codec, p []byte) (any, error) {
				var m events.ItemAdded
				return m, c.Unmarshal(p, &m)
			},
			PartitionKey: func(m any) (string, error) { return m.(events.ItemAdded).PartitionKey() },
			Invoke: func(ctx context.Context, _ any, m any) error {
				e := m.(events.ItemAdded)
				if h.lat != nil && e.Seq >= 0 {
					if mi, ok := runtime.MessageFromContext(ctx); ok {
						h.lat.add(time.Since(mi.PublishedAt))
					}
				}
				h.apply(e.ClientID)
				return nil
			},
		}},
	}
}

// plainMessage is the counter as the plain group's handler: it decodes
// the payload, as a handler would, and takes the publish time from the
// message's "t" field (the publisher's clock).
func (h *counter) plainMessage(m redis.XMessage) {
	now := time.Now()
	var e events.ItemAdded
	s, _ := m.Values["payload"].(string)
	if runtime.JSON.Unmarshal([]byte(s), &e) != nil {
		return
	}
	if h.lat != nil && e.Seq >= 0 {
		t, _ := m.Values["t"].(string)
		at, _ := strconv.ParseInt(t, 10, 64)
		h.lat.add(now.Sub(time.Unix(0, at)))
	}
	h.apply(e.ClientID)
}

// apply counts an event of key. The hot tally goes first: whoever sees
// the total has the hot key's events in it.
func (h *counter) apply(key string) {
	now := time.Now().UnixNano()
	if key == h.hotKey {
		h.hot.add(now)
	}
	h.add(now)
}

// BenchmarkThroughput is the side-by-side run of issue #12: b.N events
// (100,000 in make bench) published over 1, 8, 64 or 1,000 keys (in
// turn), or over 1,000 keys drawn from a Zipf distribution (zipfKeys, the
// same events in the same order for both), then applied either by two
// seqby engines, each its own OS process (keyed, sequential: the
// guarantee on; process_test.go), or by two consumers of a plain consumer
// group on one stream (XREADGROUP COUNT 100, then XACK of the batch), on
// the same private redis-server, one after the other. The rate runs from
// the first event applied to the last, so it excludes start-up; compare
// seqby's with the plain group's of the same -count round.
//
// Besides msg/s and CPU use as a share of a core, each run reports its
// costs per event (issue #27): Redis CPU (INFO cpu), the consumers' CPU,
// the commands Redis ran (INFO commandstats, the commands scripts call
// included) and the script calls among them, all from after publishing
// to the last event applied. With one key and with Zipf keys it also
// reports the hottest key's share of the events and its own drain rate
// (its events per second from its first applied to its last), so the
// hot key among 999 others compares with the hot key alone.
func BenchmarkThroughput(b *testing.B) {
	for _, ks := range keySets {
		b.Run("seqby/"+ks.name, func(b *testing.B) {
			keys := ks.keys(b.N)
			hot, share := hottest(keys)
			c := newClient(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			publishKeys(ctx, b, c, keys)
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			cpu0, t0 := redisCPU(ctx, b, c), time.Now()
			b.ResetTimer()
			ep := startProcs(b, c.Options().Addr, 2, procSpec{hotKey: clientID(hot), ackBatch: ks.ackBatch})
			waitUntil(b, throughputLimit, "events applied", func() bool { n, _ := ep.applied(); return n >= int64(b.N) })
			b.StopTimer()
			all, hotSpan, _ := ep.status()
			rate := all.rate()
			b.ReportMetric(rate, "msg/s")
			// b.N is 1 in the run that sizes the benchmark: no rate there.
			if ks.name == "keys=64" && b.N >= 1000 && rate > float64frombits(maxRate64.Load()) {
				maxRate64.Store(math.Float64bits(rate))
			}
			redisSecs := redisCPU(ctx, b, c) - cpu0
			b.ReportMetric(100*redisSecs/time.Since(t0).Seconds(), "redis-cpu-%")
			reportCommands(ctx, b, c, redisSecs, b.N)
			if ks.hot {
				b.ReportMetric(100*share, "hot-share-%")
				b.ReportMetric(hotSpan.rate(), "hot-msg/s")
			}
			// Over the processes' whole life, start and stop included.
			cpu := ep.stop(b)
			b.ReportMetric(100*cpu.Seconds()/time.Since(t0).Seconds(), "engines-cpu-%")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "engine-cpu-us/ev")
		})
		if ks.ackBatch > 0 {
			continue // the plain group's run is the same as without it
		}
		b.Run("plain/"+ks.name, func(b *testing.B) {
			keys := ks.keys(b.N)
			hot, share := hottest(keys)
			c := newClient(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const stream, group = "plain", "g"
			var batch []any
			pipe := c.Pipeline()
			for i, k := range keys {
				ev, _ := runtime.JSON.Marshal(events.ItemAdded{ClientID: clientID(k), Seq: i})
				batch = append(batch, pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"type", "ItemAdded", "payload", ev}}))
				if len(batch) == 1000 || i == len(keys)-1 {
					if _, err := pipe.Exec(ctx); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if err := c.XGroupCreate(ctx, stream, group, "0").Err(); err != nil {
				b.Fatal(err)
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			h := &counter{hotKey: clientID(hot)}
			cpu0, t0 := redisCPU(ctx, b, c), time.Now()
			// The consumers run in this process, so their CPU time is
			// this process's over the consumer phase: it includes the
			// benchmark's own overhead (the progress polling, the Redis
			// INFO calls, collecting what publishing left behind), so it
			// overstates the plain group's cost a little.
			self0 := selfCPU()
			b.ResetTimer()
			wg := plainConsumers(ctx, c, stream, group, h.plainMessage)
			waitUntil(b, throughputLimit, "events applied", func() bool { return h.n.Load() >= int64(b.N) })
			b.StopTimer()
			self := time.Duration(selfCPU() - self0)
			b.ReportMetric(h.span().rate(), "msg/s")
			redisSecs := redisCPU(ctx, b, c) - cpu0
			b.ReportMetric(100*redisSecs/time.Since(t0).Seconds(), "redis-cpu-%")
			reportCommands(ctx, b, c, redisSecs, b.N)
			if ks.hot {
				b.ReportMetric(100*share, "hot-share-%")
				b.ReportMetric(h.hot.span().rate(), "hot-msg/s")
			}
			b.ReportMetric(float64(self.Microseconds())/float64(b.N), "engine-cpu-us/ev")
			cancel()
			wg.Wait()
		})
	}
}

// BenchmarkReplicas is the strict mode's cost (issue #28): b.N events
// (20,000 in make bench) over 64 uniform keys and over 1,000 Zipf keys,
// applied by two engine processes on a primary with two replicas (all on
// this machine), in the default mode and with Options.ReplicaAcks 2 (a
// barrier, SET and WAIT, before every attempt and every ack, shared by the
// partitions waiting at that moment). Reported as for BenchmarkThroughput:
// msg/s, Redis's CPU and commands per event, the engines' CPU per event.
func BenchmarkReplicas(b *testing.B) {
	for _, ks := range []struct {
		name string
		keys func(n int) []int
	}{{"keys=64", uniformKeys(64)}, {"keys=1000-zipf", zipfKeys}} {
		for _, mode := range []struct {
			name string
			acks int
		}{{"default", 0}, {"strict", 2}} {
			b.Run(mode.name+"/"+ks.name, func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				s, err := redistest.StartSentinel(ctx, 2, 0, redistest.Config{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(s.Close)
				c := redis.NewClient(&redis.Options{Addr: s.Nodes[0].Addr, ContextTimeoutEnabled: true})
				b.Cleanup(func() { c.Close() })
				publishKeys(ctx, b, c, ks.keys(b.N))
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				cpu0, t0 := redisCPU(ctx, b, c), time.Now()
				b.ResetTimer()
				ep := startProcs(b, c.Options().Addr, 2, procSpec{replicaAcks: mode.acks})
				waitUntil(b, throughputLimit, "events applied", func() bool { n, _ := ep.applied(); return n >= int64(b.N) })
				b.StopTimer()
				all, _, _ := ep.status()
				b.ReportMetric(all.rate(), "msg/s")
				redisSecs := redisCPU(ctx, b, c) - cpu0
				b.ReportMetric(100*redisSecs/time.Since(t0).Seconds(), "redis-cpu-%")
				reportCommands(ctx, b, c, redisSecs, b.N)
				cpu := ep.stop(b)
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "engine-cpu-us/ev")
			})
		}
	}
}

// keySets are BenchmarkThroughput's spreads of events over keys: keys(n)
// is the key numbers of n events (clientID names them); hot is whether
// the run reports its hottest key; ackBatch puts the handler in the
// batched mode (Registration.AckBatch, 100: the plain group's COUNT), a
// seqby run only.
var keySets = []struct {
	name     string
	keys     func(n int) []int
	hot      bool
	ackBatch int // the handler's AckBatch: the batched mode, seqby only
}{
	{"keys=1", uniformKeys(1), true, 0},
	{"keys=1-batched", uniformKeys(1), true, 100},
	{"keys=8", uniformKeys(8), false, 0},
	{"keys=64", uniformKeys(64), false, 0},
	{"keys=1000", uniformKeys(1000), false, 0},
	{"keys=1000-zipf", zipfKeys, true, 0},
	{"keys=1000-zipf-batched", zipfKeys, true, 100},
}

// uniformKeys spreads events round-robin over keys.
func uniformKeys(keys int) func(n int) []int {
	return func(n int) []int {
		ks := make([]int, n)
		for i := range ks {
			ks[i] = i % keys
		}
		return ks
	}
}

// zipfKeys draws n keys out of 1,000 whose ranks follow Zipf's law with
// s = 1.1: NewZipf's values k in [0, 999] have P(k) ∝ (v+k)^-s, so v = 1
// makes key k the rank k+1 (key 0, "c-0", the hottest, about 18% of the
// events). The seed is fixed: every run, seqby's and the plain group's,
// publishes the same events in the same order.
func zipfKeys(n int) []int {
	z := rand.NewZipf(rand.New(rand.NewPCG(27, 1000)), 1.1, 1, 999)
	ks := make([]int, n)
	for i := range ks {
		ks[i] = int(z.Uint64())
	}
	return ks
}

// hottest is the key with the most events and its share of them.
func hottest(keys []int) (key int, share float64) {
	count := map[int]int{}
	for _, k := range keys {
		count[k]++
		if count[k] > count[key] || (count[k] == count[key] && k < key) {
			key = k
		}
	}
	return key, float64(count[key]) / float64(len(keys))
}

// clientID is key k's partition key.
func clientID(k int) string { return fmt.Sprintf("c-%d", k) }

// throughputLimit bounds a throughput run's wait for its events: far
// longer than 100,000 events take, so reaching it means events are lost
// or the consumers stuck, not slow.
const throughputLimit = 10 * time.Minute

// waitUntil polls done every millisecond until it holds; after limit, the
// benchmark fails rather than hang.
func waitUntil(b *testing.B, limit time.Duration, what string, done func() bool) {
	deadline := time.Now().Add(limit)
	for !done() {
		if time.Now().After(deadline) {
			b.Fatalf("%s: not done after %v", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// reportCommands reports, per event over n, Redis's CPU time (redisSecs)
// and, from INFO commandstats since the last CONFIG RESETSTAT, the
// commands Redis ran and the script calls among them.
func reportCommands(ctx context.Context, b *testing.B, c *redis.Client, redisSecs float64, n int) {
	stats, cmds, scripts := commandStats(ctx, b, c)
	if os.Getenv("SEQBY_BENCH_STATS") != "" {
		fmt.Fprintln(os.Stderr, stats)
	}
	b.ReportMetric(1e6*redisSecs/float64(n), "redis-cpu-us/ev")
	b.ReportMetric(float64(cmds)/float64(n), "redis-cmds/ev")
	b.ReportMetric(float64(scripts)/float64(n), "script-calls/ev")
}

// commandStats is INFO commandstats, the calls of every command in it
// (those scripts made included) but the benchmark's own (INFO, CONFIG
// RESETSTAT), and the script calls (EVAL, EVALSHA, FCALL and their
// read-only forms) among them.
func commandStats(ctx context.Context, b testing.TB, c redis.UniversalClient) (stats string, commands, scripts int64) {
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_config|resetstat" || name == "cmdstat_info" {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		commands += n
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
			scripts += n
		}
	}
	return stats, commands, scripts
}

// BenchmarkClaim measures how long two engines with the default options
// (DiscoveryInterval 1s) take to own b.N partitions (10,000 in make
// bench), each with one event published beforehand; reported in seconds
// and in discovery intervals. The first cycle runs at the start, so
// "within two cycles" is at most about two intervals.
func BenchmarkClaim(b *testing.B) {
	c := newClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	publishAll(ctx, b, c, b.N)
	var engines []*runtime.Engine
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range 2 {
		eng, err := runtime.NewEngine(c, runtime.Options{OwnerID: fmt.Sprintf("claim-%d", i),
			PartitionWarnThreshold: 1 << 30, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.Register((&counter{}).registration()); err != nil {
			b.Fatal(err)
		}
		engines = append(engines, eng)
		wg.Add(1)
		go func() { defer wg.Done(); _ = eng.Run(ctx) }()
	}
	for {
		owned := 0
		for _, e := range engines {
			owned += len(e.Status().Partitions)
		}
		if owned >= b.N {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	d := time.Since(start)
	b.ReportMetric(d.Seconds(), "s-to-own-all")
	b.ReportMetric(d.Seconds()/time.Second.Seconds(), "discovery-intervals") // the default DiscoveryInterval
	cancel()
	wg.Wait()
}

// BenchmarkIdle measures the idle cost of issue #12: two engines (or
// SEQBY_BENCH_ENGINES) with the
// default options own b.N partitions (2,000 in make bench), each with its
// one event handled; then for idleWindow nothing is published, and it
// reports the calls the engines sent (a pipelined command counts one, a
// script one), the script calls among them, the commands Redis ran (every
// command, inside scripts too, from INFO commandstats), Redis's CPU use
// over the window, and Redis's memory per idle partition (used_memory
// with the partitions idle, less before anything was published, over b.N);
// also how long the engines took to handle every partition's event from
// their start, and the warnings they logged other than the one about a
// category's cardinality (make bench runs it at 2,000 and 100,000).
func BenchmarkIdle(b *testing.B) {
	c := newClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mem0 := usedMemory(ctx, b, c)
	publishAll(ctx, b, c, b.N)
	h := &counter{}
	ec, calls := countingClient(b, c)
	var logs lockedBuffer
	start := time.Now()
	wg := startEngines(ctx, b, ec, h, runtime.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	for h.n.Load() < int64(b.N) {
		time.Sleep(10 * time.Millisecond)
	}
	handled := time.Since(start)
	time.Sleep(5 * time.Second) // let the last reads, trims and claims settle
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0, calls0, scripts0 := redisCPU(ctx, b, c), calls.all.Load(), calls.scripts.Load()
	b.ResetTimer()
	time.Sleep(idleWindow)
	b.StopTimer()
	cpu := redisCPU(ctx, b, c) - cpu0
	stats, commands, _ := commandStats(ctx, b, c)
	if os.Getenv("SEQBY_BENCH_STATS") != "" {
		fmt.Fprintln(os.Stderr, stats)
	}
	secs := idleWindow.Seconds()
	b.ReportMetric(float64(calls.all.Load()-calls0)/secs, "engine-calls/s")
	b.ReportMetric(float64(calls.scripts.Load()-scripts0)/secs, "script-calls/s")
	b.ReportMetric(float64(commands)/secs, "redis-cmds/s")
	b.ReportMetric(100*cpu/secs, "redis-cpu-%")
	b.ReportMetric((usedMemory(ctx, b, c)-mem0)/float64(b.N), "redis-bytes/partition")
	b.ReportMetric(handled.Seconds(), "s-to-handle-all")
	warnings, kinds := 0, map[string]int{}
	for _, line := range strings.Split(logs.String(), "\n") {
		if line != "" && !strings.Contains(line, "category has many partitions") {
			warnings++
			_, msg, _ := strings.Cut(line, "msg=")
			kinds[msg[:min(len(msg), 60)]]++
		}
	}
	for msg, n := range kinds {
		b.Logf("%d warnings: %s", n, msg)
	}
	b.ReportMetric(float64(warnings), "other-warnings")
	cancel()
	wg.Wait()
}

// lockedBuffer is a log sink tests read while goroutines write to it.
type lockedBuffer = logsink.Buffer

// callCounter counts the commands a client sends.
type callCounter struct{ all, scripts atomic.Int64 }

// countingClient is a client on c's server whose commands are counted.
func countingClient(b testing.TB, c *redis.Client) (*redis.Client, *callCounter) {
	n := &callCounter{}
	ec := redis.NewClient(&redis.Options{Addr: c.Options().Addr, ContextTimeoutEnabled: true})
	ec.AddHook(n)
	b.Cleanup(func() { ec.Close() })
	return ec, n
}

func (n *callCounter) count(cmds ...redis.Cmder) {
	for _, cmd := range cmds {
		n.all.Add(1)
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			n.scripts.Add(1)
		}
	}
}

func (n *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (n *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { n.count(cmd); return next(ctx, cmd) }
}

func (n *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { n.count(cmds...); return next(ctx, cmds) }
}

// usedMemory is the server's used_memory in bytes.
func usedMemory(ctx context.Context, b testing.TB, c redis.UniversalClient) float64 {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

// idleWindow is how long BenchmarkIdle watches an idle Redis.
const idleWindow = 20 * time.Second

// redisCPU is the server's used CPU seconds (user + system).
func redisCPU(ctx context.Context, b testing.TB, c redis.UniversalClient) float64 {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

// publishAll publishes b.N keyed events over keys in batches.
func publishAll(ctx context.Context, b *testing.B, c redis.UniversalClient, keys int) {
	publishKeys(ctx, b, c, uniformKeys(keys)(b.N))
}

// publishKeys publishes an event of each key in keys, in order, in
// batches.
func publishKeys(ctx context.Context, b *testing.B, c redis.UniversalClient, keys []int) {
	pub := runtime.NewPublisher(c, runtime.PublisherOptions{})
	var msgs []runtime.Message
	for i, k := range keys {
		msgs = append(msgs, events.ItemAdded{ClientID: clientID(k), Seq: i})
		if len(msgs) == 1000 || i == len(keys)-1 {
			if err := pub.PublishBatch(ctx, msgs); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
}

// BenchmarkStorage is the storage run of issue #10: b.N events (20,000 in
// make bench) over 1,000 keys, handled by two engines that reap partitions
// cold for storageReapAfter; it reports Redis's used_memory before
// publishing, with everything published, once retention has trimmed every
// handled stream, and once every partition is reaped, with the entries and
// keys left.
func BenchmarkStorage(b *testing.B) {
	const keys = 1000
	c := newClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	used := func() float64 { return usedMemory(ctx, b, c) / 1e6 }
	streams := func() (n int64) {
		for k := range keys {
			n += c.XLen(ctx, fmt.Sprintf("cart:{c-%d}", k)).Val()
		}
		return n
	}
	before := used()
	pub := runtime.NewPublisher(c, runtime.PublisherOptions{})
	for i := 0; i < b.N; i++ {
		if err := pub.Publish(ctx, events.ItemAdded{ClientID: fmt.Sprintf("c-%d", i%keys), Seq: i}); err != nil {
			b.Fatal(err)
		}
	}
	published := used()
	keysBefore := c.DBSize(ctx).Val()
	h := &counter{}
	wg := startEngines(ctx, b, c, h, runtime.Options{DiscoveryInterval: 100 * time.Millisecond, ReapAfter: storageReapAfter})
	for h.n.Load() < int64(b.N) || streams() > 0 {
		time.Sleep(50 * time.Millisecond)
	}
	handled := used()
	for c.SCard(ctx, "{cart}:__partitions__").Val() > 0 || c.SCard(ctx, "{cart}:__reaping__").Val() > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	b.ReportMetric(before, "MB-before")
	b.ReportMetric(published, "MB-published")
	b.ReportMetric(handled, "MB-handled")
	b.ReportMetric(used(), "MB-reaped")
	b.ReportMetric(float64(streams()), "entries-left")
	b.ReportMetric(float64(keysBefore), "keys-published")
	b.ReportMetric(float64(c.DBSize(ctx).Val()), "keys-reaped")
	// What is left is bounded: the category's wake-up stream, capped at
	// SignalMaxLen entries, and three small per-category keys.
	b.ReportMetric(float64(c.MemoryUsage(ctx, "{cart}:__signal__", 0).Val())/1e6, "MB-signal-stream")
	cancel()
	wg.Wait()
}

// storageReapAfter is the storage run's Options.ReapAfter: short, so the
// run measures the end state without waiting an hour.
const storageReapAfter = 2 * time.Second

// fastDiscovery claims the partitions of a run quickly, so a throughput
// run measures the handling, not the claiming.
var fastDiscovery = runtime.Options{DiscoveryInterval: 100 * time.Millisecond}

// startEngines runs two engine instances (benchEngines), in this process,
// with h's registration until ctx ends; wait on the returned group for
// them.
// opts are their Options but for OwnerID and Logger.
func startEngines(ctx context.Context, b testing.TB, c redis.UniversalClient, h *counter, opts runtime.Options) *sync.WaitGroup {
	return startRegistration(ctx, b, c, h.registration(), opts)
}

// startRegistration is startEngines for any registration.
func startRegistration(ctx context.Context, b testing.TB, c redis.UniversalClient, reg runtime.Registration, opts runtime.Options) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range benchEngines() {
		opts.OwnerID = fmt.Sprintf("bench-%d", i)
		if opts.Logger == nil {
			opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
		eng, err := runtime.NewEngine(c, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.Register(reg); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = eng.Run(ctx) }()
	}
	return &wg
}

func float64frombits(b uint64) float64 { return math.Float64frombits(b) }
