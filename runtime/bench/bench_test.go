// Package bench measures the runtime against a private redis-server:
// publish throughput and end-to-end keyed throughput. Run with make bench;
// results are written down in docs/benchmarks.md, never asserted in tests.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
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
// ends: XREADGROUP COUNT 100 (blocking up to 100ms), each message to
// each, then one XACK of the batch.
func plainConsumers(ctx context.Context, c *redis.Client, stream, group string, each func(redis.XMessage)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: fmt.Sprint(i),
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
		}()
	}
	return &wg
}

// plainXAdd is the XADD of a plain producer: the same payload, one stream.
func plainXAdd(i int) *redis.XAddArgs {
	ev, _ := runtime.JSON.Marshal(events.ItemAdded{ClientID: fmt.Sprintf("c-%d", i%64), Seq: i})
	return &redis.XAddArgs{Stream: "plain", Values: []any{"type", "ItemAdded", "payload", ev}}
}

// counter is a keyed handler that counts what it applies.
type counter struct{ n, first, last atomic.Int64 }

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
			Invoke:       func(context.Context, any, any) error { h.apply(); return nil },
		}},
	}
}

// counter also records when it applied its first and last event, so a
// run's rate excludes the engines' start (discovery, claiming).
func (h *counter) apply() {
	now := time.Now().UnixNano()
	h.first.CompareAndSwap(0, now)
	h.last.Store(now)
	h.n.Add(1)
}

// rate is events per second between the first and the last applied.
func (h *counter) rate() float64 {
	d := time.Duration(h.last.Load() - h.first.Load())
	return float64(h.n.Load()) / d.Seconds()
}

// BenchmarkThroughput is the side-by-side run of issue #12: b.N events
// (100,000 in make bench) published over 1, 8, 64 or 1,000 keys, then
// applied either by two seqby engines, each its own OS process (keyed,
// sequential: the guarantee on; process_test.go), or by two consumers of
// a plain consumer group on one stream (XREADGROUP COUNT 100, then XACK of
// the batch), on the same private redis-server, one after the other. The rate runs from the first event
// applied to the last, so it excludes start-up; compare seqby's with the
// plain group's of the same -count round.
func BenchmarkThroughput(b *testing.B) {
	for _, keys := range []int{1, 8, 64, 1000} {
		b.Run(fmt.Sprintf("seqby/keys=%d", keys), func(b *testing.B) {
			c := newClient(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			publishAll(ctx, b, c, keys)
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			cpu0, t0 := redisCPU(ctx, b, c), time.Now()
			b.ResetTimer()
			ep := startEngineProcs(b, c.Options().Addr, 2)
			for {
				if n, _ := ep.applied(); n >= int64(b.N) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			_, rate := ep.applied()
			b.ReportMetric(rate, "msg/s")
			// b.N is 1 in the run that sizes the benchmark: no rate there.
			if keys == 64 && b.N >= 1000 && rate > float64frombits(maxRate64.Load()) {
				maxRate64.Store(math.Float64bits(rate))
			}
			b.ReportMetric(100*(redisCPU(ctx, b, c)-cpu0)/time.Since(t0).Seconds(), "redis-cpu-%")
			if os.Getenv("SEQBY_BENCH_STATS") != "" {
				fmt.Fprintln(os.Stderr, c.Info(ctx, "commandstats").Val())
			}
			// Over the processes' whole life, start and stop included.
			b.ReportMetric(100*ep.stop(b).Seconds()/time.Since(t0).Seconds(), "engines-cpu-%")
		})
		b.Run(fmt.Sprintf("plain/keys=%d", keys), func(b *testing.B) {
			c := newClient(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const stream, group = "plain", "g"
			var batch []any
			pipe := c.Pipeline()
			for i := 0; i < b.N; i++ {
				ev, _ := runtime.JSON.Marshal(events.ItemAdded{ClientID: fmt.Sprintf("c-%d", i%keys), Seq: i})
				batch = append(batch, pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"type", "ItemAdded", "payload", ev}}))
				if len(batch) == 1000 || i == b.N-1 {
					if _, err := pipe.Exec(ctx); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if err := c.XGroupCreate(ctx, stream, group, "0").Err(); err != nil {
				b.Fatal(err)
			}
			h := &counter{}
			cpu0, t0 := redisCPU(ctx, b, c), time.Now()
			b.ResetTimer()
			wg := plainConsumers(ctx, c, stream, group, func(m redis.XMessage) {
				var e events.ItemAdded
				if runtime.JSON.Unmarshal([]byte(m.Values["payload"].(string)), &e) == nil {
					h.apply()
				}
			})
			for h.n.Load() < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(h.rate(), "msg/s")
			b.ReportMetric(100*(redisCPU(ctx, b, c)-cpu0)/time.Since(t0).Seconds(), "redis-cpu-%")
			cancel()
			wg.Wait()
		})
	}
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

// BenchmarkIdle measures the idle cost of issue #12: two engines with the
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
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var commands int64
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_config|resetstat" || name == "cmdstat_info" {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		commands += n
	}
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
	pub := runtime.NewPublisher(c, runtime.PublisherOptions{})
	var msgs []runtime.Message
	for i := 0; i < b.N; i++ {
		msgs = append(msgs, events.ItemAdded{ClientID: fmt.Sprintf("c-%d", i%keys), Seq: i})
		if len(msgs) == 1000 || i == b.N-1 {
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

// startEngines runs two engine instances (in this process) with h's
// registration until ctx ends; wait on the returned group for them.
// opts are their Options but for OwnerID and Logger.
func startEngines(ctx context.Context, b testing.TB, c redis.UniversalClient, h *counter, opts runtime.Options) *sync.WaitGroup {
	return startRegistration(ctx, b, c, h.registration(), opts)
}

// startRegistration is startEngines for any registration.
func startRegistration(ctx context.Context, b testing.TB, c redis.UniversalClient, reg runtime.Registration, opts runtime.Options) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range 2 {
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
