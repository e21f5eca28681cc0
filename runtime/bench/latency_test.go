package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/examples/orders/events"
	"github.com/seqby/seqby/runtime"
)

// maxRate64 is the best seqby rate over 64 keys that BenchmarkThroughput
// measured in this process (msg/s, as float64 bits); BenchmarkLatency
// publishes at half of it.
var maxRate64 atomic.Uint64

// latencyRate is the rate BenchmarkLatency publishes at: half the
// measured maximum, or defaultLatencyRate when Throughput did not run in
// this process; SEQBY_BENCH_RATE (msg/s) overrides it.
func latencyRate() float64 {
	if r, err := strconv.ParseFloat(os.Getenv("SEQBY_BENCH_RATE"), 64); err == nil && r > 0 {
		return r
	}
	if r := float64frombits(maxRate64.Load()); r > 0 {
		return r / 2
	}
	return defaultLatencyRate
}

const defaultLatencyRate = 10000

// latencyPublishers publish concurrently, each at its share of the rate,
// since one publisher waits a round trip per publish.
const latencyPublishers = 16

// BenchmarkLatency is the latency run of issue #12: b.N events over 64
// keys published at a steady rate (half of the maximum Throughput measured
// for seqby in the same process, else 10,000/s), by latencyPublishers
// goroutines each at its share, and the time from the publish to the
// handler's start (seqby: MessageInfo.PublishedAt, the publisher's clock;
// plain: a timestamp field, the same clock) reported as p50 and p99, for
// two seqby engines and for a plain consumer group (two consumers,
// XREADGROUP COUNT 100 BLOCK, then XACK) at the same rate.
func BenchmarkLatency(b *testing.B) {
	rate := latencyRate()
	b.Run("seqby", func(b *testing.B) {
		c := newClient(b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		lat := newLatencies(b.N)
		reg := (&counter{}).registration()
		reg.Routes[0].Invoke = func(ctx context.Context, _ any, _ any) error {
			if mi, ok := runtime.MessageFromContext(ctx); ok {
				lat.add(time.Since(mi.PublishedAt))
			}
			return nil
		}
		// The engines have their own client, as a consumer service would.
		ec, _ := countingClient(b, c)
		wg := startRegistration(ctx, b, ec, reg, fastDiscovery)
		// Claim the 64 partitions before the clock starts.
		pub := runtime.NewPublisher(c, runtime.PublisherOptions{})
		for k := range 64 {
			if err := pub.Publish(ctx, events.ItemAdded{ClientID: fmt.Sprintf("c-%d", k), Seq: -1}); err != nil {
				b.Fatal(err)
			}
		}
		for lat.n.Load() < 64 {
			time.Sleep(time.Millisecond)
		}
		lat.reset()
		c.ConfigResetStat(ctx)
		cpu0 := redisCPU(ctx, b, c)
		b.ResetTimer()
		paced(ctx, b, rate, func(i int) error {
			return pub.Publish(ctx, events.ItemAdded{ClientID: fmt.Sprintf("c-%d", i%64), Seq: i})
		})
		for lat.n.Load() < int64(b.N) {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		lat.report(b, rate)
		b.ReportMetric(100*(redisCPU(ctx, b, c)-cpu0)/b.Elapsed().Seconds(), "redis-cpu-%")
		if os.Getenv("SEQBY_BENCH_STATS") != "" {
			fmt.Fprintln(os.Stderr, c.Info(ctx, "commandstats").Val())
		}
		cancel()
		wg.Wait()
	})
	b.Run("plain", func(b *testing.B) {
		c := newClient(b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const stream, group = "plain", "g"
		if err := c.XGroupCreateMkStream(ctx, stream, group, "$").Err(); err != nil {
			b.Fatal(err)
		}
		lat := newLatencies(b.N)
		wg := plainConsumers(ctx, c, stream, group, func(m redis.XMessage) {
			at, _ := strconv.ParseInt(m.Values["t"].(string), 10, 64)
			lat.add(time.Since(time.Unix(0, at)))
		})
		cpu0 := redisCPU(ctx, b, c)
		b.ResetTimer()
		paced(ctx, b, rate, func(i int) error {
			ev, _ := runtime.JSON.Marshal(events.ItemAdded{ClientID: fmt.Sprintf("c-%d", i%64), Seq: i})
			return c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"type", "ItemAdded", "payload", ev, "t", time.Now().UnixNano()}}).Err()
		})
		for lat.n.Load() < int64(b.N) {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		lat.report(b, rate)
		b.ReportMetric(100*(redisCPU(ctx, b, c)-cpu0)/b.Elapsed().Seconds(), "redis-cpu-%")
		cancel()
		wg.Wait()
	})
}

// paced calls publish for i in [0, b.N) at rate per second in total,
// spread over latencyPublishers goroutines, each publishing on its own
// schedule (not faster to catch up, so a slow publish shows as a lower
// rate, reported, rather than a burst).
func paced(ctx context.Context, b *testing.B, rate float64, publish func(i int) error) {
	var wg sync.WaitGroup
	start := time.Now()
	every := time.Duration(float64(time.Second) * latencyPublishers / rate)
	for g := range latencyPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := start.Add(time.Duration(g) * every / latencyPublishers)
			for i := g; i < b.N; i += latencyPublishers {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				next = next.Add(every)
				if err := publish(i); err != nil && ctx.Err() == nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// latencies collects durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
	n  atomic.Int64
}

func newLatencies(n int) *latencies { return &latencies{d: make([]time.Duration, 0, n)} }

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
	l.n.Add(1)
}

func (l *latencies) reset() {
	l.mu.Lock()
	l.d = l.d[:0]
	l.n.Store(0)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.d)
	q := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))]) / 1e6 }
	b.ReportMetric(rate, "target-msg/s")
	b.ReportMetric(float64(len(l.d))/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
