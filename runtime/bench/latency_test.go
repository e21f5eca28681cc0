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
// measured in this process (msg/s, as float64 bits); BenchmarkLatency's
// rate=auto publishes at half of it.
var maxRate64 atomic.Uint64

// latencyRate is the rate of BenchmarkLatency's rate=auto: half the
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

// benchEngines is how many engine instances BenchmarkLatency's seqby runs
// and BenchmarkIdle start: 2, or SEQBY_BENCH_ENGINES (issue #41 measured
// wake-ups with 2 and with 8). The plain group keeps two consumers.
func benchEngines() int {
	if n, err := strconv.Atoi(os.Getenv("SEQBY_BENCH_ENGINES")); err == nil && n > 0 {
		return n
	}
	return 2
}

// latencyPublishers publish concurrently, each at its share of the rate,
// since one publisher waits a round trip per publish.
const latencyPublishers = 16

// latencyWindow bounds a latency run: it publishes b.N events or as many
// as the rate sends in this window, whichever is fewer, so that make
// bench's 100,000x does not hold the 1,000 ev/s runs for 100 seconds.
const latencyWindow = 10 * time.Second

// latencyKeys is the keys a latency run publishes over, round-robin.
const latencyKeys = 64

// BenchmarkLatency is the latency run of issues #12 and #27: events over
// 64 keys published at a steady rate (rate=1000 and rate=5000 ev/s, which
// do not saturate the machine; rate=auto is latencyRate, half of the
// maximum Throughput measured for seqby in the same process) by
// latencyPublishers goroutines each at its share, for two seqby engines
// (benchEngines: SEQBY_BENCH_ENGINES sets another count) and for the
// plain consumer group (XREADGROUP COUNT 100 BLOCK, then
// XACK), two consumers, at the same rate in the same run. The engines and
// the plain consumers are each their own OS process (process_test.go),
// the engines with the default Options, as in production, so that their
// CPU time is theirs alone while this process publishes.
//
// It reports the time from the publish to the handler's start (seqby:
// MessageInfo.PublishedAt; plain: a timestamp field; both the publisher's
// clock) as p50 and p99, the consumers' CPU per event over the run
// (engine-cpu-us/ev, the idle work between events included: the cost of
// a steady rate) and Redis's CPU per event, publishing included. Before
// the clock starts an event of each key (Seq -1, not measured) has the
// engines own the 64 partitions.
func BenchmarkLatency(b *testing.B) {
	for _, r := range []struct {
		name string
		rate func() float64
	}{
		{"rate=1000", func() float64 { return 1000 }},
		{"rate=5000", func() float64 { return 5000 }},
		{"rate=auto", latencyRate},
	} {
		b.Run("seqby/"+r.name, func(b *testing.B) { benchLatency(b, r.rate(), false) })
		b.Run("plain/"+r.name, func(b *testing.B) { benchLatency(b, r.rate(), true) })
	}
}

// benchLatency is one of BenchmarkLatency's runs: seqby's, or with plain
// the plain group's.
func benchLatency(b *testing.B, rate float64, plain bool) {
	c := newClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var publish func(key, seq int) error
	if plain {
		const stream, group = "plain", "g"
		if err := c.XGroupCreateMkStream(ctx, stream, group, "$").Err(); err != nil {
			b.Fatal(err)
		}
		publish = func(key, seq int) error {
			ev, _ := runtime.JSON.Marshal(events.ItemAdded{ClientID: clientID(key), Seq: seq})
			return c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"type", "ItemAdded", "payload", ev, "t", time.Now().UnixNano()}}).Err()
		}
	} else {
		pub := runtime.NewPublisher(c, runtime.PublisherOptions{})
		publish = func(key, seq int) error {
			return pub.Publish(ctx, events.ItemAdded{ClientID: clientID(key), Seq: seq})
		}
	}
	n := 2
	if !plain {
		n = benchEngines()
	}
	ep := startProcs(b, c.Options().Addr, n, procSpec{plain: plain, latencyDir: b.TempDir(), defaults: true})
	for k := range latencyKeys {
		if err := publish(k, -1); err != nil {
			b.Fatal(err)
		}
	}
	// With the default DiscoveryInterval (1s) the engines own every
	// partition within a few seconds.
	waitUntil(b, time.Minute, "warm-up events applied", func() bool { n, _ := ep.applied(); return n >= latencyKeys })
	_, _, cpu0 := ep.status()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	redis0 := redisCPU(ctx, b, c)
	b.ResetTimer()
	sent := paced(ctx, b, rate, min(b.N, int(rate*latencyWindow.Seconds())), func(i int) error {
		return publish(i%latencyKeys, i)
	})
	waitUntil(b, time.Minute, "events applied", func() bool { n, _ := ep.applied(); return n >= latencyKeys+sent })
	b.StopTimer()
	_, _, cpu1 := ep.status()
	redisSecs := redisCPU(ctx, b, c) - redis0
	b.ReportMetric(float64(sent), "events")
	b.ReportMetric(100*redisSecs/b.Elapsed().Seconds(), "redis-cpu-%")
	b.ReportMetric(1e6*redisSecs/float64(sent), "redis-cpu-us/ev")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(sent), "engine-cpu-us/ev")
	if os.Getenv("SEQBY_BENCH_STATS") != "" {
		stats, _, _ := commandStats(ctx, b, c)
		fmt.Fprintln(os.Stderr, stats)
	}
	ep.stop(b)
	ep.latencies(b).report(b, rate)
}

// paced calls publish for i in [0, n) at rate per second in total, spread
// over latencyPublishers goroutines, each publishing on its own schedule
// (not faster to catch up, so a slow publish shows as a lower rate,
// reported, rather than a burst). It stops early at twice the time n
// events should take, plus ten seconds, and returns how many it
// published.
func paced(ctx context.Context, b *testing.B, rate float64, n int, publish func(i int) error) int64 {
	var wg sync.WaitGroup
	var sent atomic.Int64
	start := time.Now()
	every := time.Duration(float64(time.Second) * latencyPublishers / rate)
	deadline := start.Add(2*time.Duration(float64(n)/rate*float64(time.Second)) + 10*time.Second)
	for g := range latencyPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := start.Add(time.Duration(g) * every / latencyPublishers)
			for i := g; i < n && time.Now().Before(deadline); i += latencyPublishers {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				next = next.Add(every)
				if err := publish(i); err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	if s := sent.Load(); s < int64(n) && !b.Failed() {
		b.Logf("published %d of %d events before the deadline", s, n)
	}
	return sent.Load()
}

// latencies collects durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func newLatencies(n int) *latencies { return &latencies{d: make([]time.Duration, 0, n)} }

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		b.Error("no latencies recorded")
		return
	}
	slices.Sort(l.d)
	q := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))]) / 1e6 }
	b.ReportMetric(rate, "target-msg/s")
	b.ReportMetric(float64(len(l.d))/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
