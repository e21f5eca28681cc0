package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/examples/orders/events"
	"github.com/seqby/seqby/runtime"
)

// Reaping under churn (issue #41): a soak at load 7-13 saw the reaper,
// then a lease per category renewed every 100 checks, lose its lease 18
// times and stop its passes early, with partitions peaking 26% above the
// floor. These constants shape BenchmarkReap's churn.
const (
	// reapChurnAfter is the engines' ReapAfter: a partition not published
	// to for this long, and handled, is cold.
	reapChurnAfter = 10 * time.Second
	// reapChurnCycle is how long the publisher takes to publish to every
	// key once: each key is published to again this long after its last
	// event, so it goes cold, is reaped and comes back once a cycle.
	reapChurnCycle = 3 * reapChurnAfter
	// reapWarmup is how long the churn runs before the measurement, for
	// the first partitions to go cold and the passes to settle.
	reapWarmup = reapChurnCycle
	// reapWindow is how long BenchmarkReap measures.
	reapWindow = 2 * reapChurnCycle
)

// BenchmarkReap measures reaping with b.N churning partitions (10,000 in
// make bench): two engines with the default options but ReapAfter
// reapChurnAfter (so one maintenance leader passes every 5 s) own b.N
// partitions, each with one event; then a publisher publishes to every
// key in turn, b.N per reapChurnCycle (at 10,000 keys, 333 events/s), so
// every key goes cold, is reaped and is published to again once a cycle.
// After reapWarmup it measures for reapWindow: the passes of the leader
// (how many, how long each took, how many partitions each checked and
// reaped), the partitions in the index (and the reaping set) every 500 ms
// against the floor (the keys published to within ReapAfter, which
// cannot be cold: every other partition is reapable), as the peak and the
// mean of how far above the floor they were, and the leader's lease
// renewals, losses and changes of leader.
func BenchmarkReap(b *testing.B) {
	c := newClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys := b.N
	last := make([]atomic.Int64, keys) // each key's last publish, Unix nanoseconds, stored before it is sent
	pub := runtime.NewPublisher(c, runtime.PublisherOptions{})
	publish := func(ks []int) {
		msgs := make([]runtime.Message, len(ks))
		now := time.Now().UnixNano()
		for i, k := range ks {
			last[k].Store(now)
			msgs[i] = events.ItemAdded{ClientID: clientID(k), Seq: int(now)}
		}
		if err := pub.PublishBatch(ctx, msgs); err != nil && ctx.Err() == nil {
			b.Error(err)
		}
	}
	all := make([]int, keys)
	for k := range all {
		all[k] = k
	}
	for lo := 0; lo < keys; lo += 1000 {
		publish(all[lo:min(lo+1000, keys)])
	}
	passes := &passLog{}
	ec, renewals := maintenanceClient(b, c)
	h := &counter{}
	wg := startEngines(ctx, b, ec, h, runtime.Options{ReapAfter: reapChurnAfter, PartitionWarnThreshold: 1 << 30,
		Logger: slog.New(passes)})
	for h.n.Load() < int64(keys) {
		time.Sleep(10 * time.Millisecond)
	}
	// The churn: every key in turn, in a batch every 100 ms.
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		const tick = 100 * time.Millisecond
		per := max(1, int(float64(keys)*tick.Seconds()/reapChurnCycle.Seconds()))
		t := time.NewTicker(tick)
		defer t.Stop()
		next := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			batch := make([]int, per)
			for i := range batch {
				batch[i] = next
				next = (next + 1) % keys
			}
			publish(batch)
		}
	}()
	time.Sleep(reapWarmup)
	b.ResetTimer()
	start := time.Now()
	renewals0, losses0, leads0 := renewals.Load(), passes.losses.Load(), passes.leads.Load()
	var above []float64
	var peakParts, floorSum int
	for time.Since(start) < reapWindow {
		time.Sleep(500 * time.Millisecond)
		n, err := c.SCard(ctx, "{cart}:__partitions__").Result()
		r, err2 := c.SCard(ctx, "{cart}:__reaping__").Result()
		if err != nil || err2 != nil {
			b.Fatal(err, err2)
		}
		since := time.Now().Add(-reapChurnAfter).UnixNano()
		floor := 0
		for k := range last {
			if last[k].Load() > since {
				floor++
			}
		}
		parts := int(n + r)
		peakParts = max(peakParts, parts)
		floorSum += floor
		above = append(above, 100*float64(parts-floor)/float64(max(floor, 1)))
	}
	b.StopTimer()
	end := time.Now()
	ps := passes.between(start, end)
	var took, checked, reaped []float64
	for _, p := range ps {
		took = append(took, p.took.Seconds())
		checked = append(checked, float64(p.partitions))
		reaped = append(reaped, float64(p.reaped))
	}
	b.ReportMetric(float64(len(ps)), "passes")
	b.ReportMetric(mean(took), "s/pass")
	b.ReportMetric(maxOf(took), "s/pass-max")
	b.ReportMetric(mean(checked), "checked/pass")
	b.ReportMetric(mean(reaped), "reaped/pass")
	b.ReportMetric(float64(floorSum)/float64(len(above)), "floor-mean")
	b.ReportMetric(float64(peakParts), "partitions-peak")
	b.ReportMetric(maxOf(above), "%-above-floor-peak")
	b.ReportMetric(mean(above), "%-above-floor-mean")
	b.ReportMetric(float64(renewals.Load()-renewals0), "renewals")
	b.ReportMetric(float64(passes.losses.Load()-losses0), "losses")
	b.ReportMetric(float64(passes.leads.Load()-leads0), "leader-changes")
	cancel()
	<-churned
	wg.Wait()
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// maintenanceClient is a client on c's server that counts the renewals of
// the maintenance lease its engines send: a script call whose only key is
// the lease (a release has that shape too, but only a stopping leader
// sends one).
func maintenanceClient(b testing.TB, c *redis.Client) (*redis.Client, *atomic.Int64) {
	n := &renewCounter{}
	ec := redis.NewClient(&redis.Options{Addr: c.Options().Addr, ContextTimeoutEnabled: true})
	ec.AddHook(n)
	b.Cleanup(func() { ec.Close() })
	return ec, &n.renewals
}

type renewCounter struct{ renewals atomic.Int64 }

func (n *renewCounter) count(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) >= 4 && cmd.Name() == "evalsha" && fmt.Sprint(a[2]) == "1" && a[3] == "seqby:__maintenance__" {
		n.renewals.Add(1)
	}
}

func (n *renewCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (n *renewCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { n.count(cmd); return next(ctx, cmd) }
}

func (n *renewCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			n.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// passLog is an slog handler that keeps what the engines' maintenance
// logs (its passes, its leaders and its losses) and drops the rest.
type passLog struct {
	mu            sync.Mutex
	passes        []pass
	losses, leads atomic.Int64
}

// pass is one maintenance pass, as its log line tells it.
type pass struct {
	at                 time.Time
	took               time.Duration
	partitions, reaped int64
}

func (l *passLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *passLog) Handle(_ context.Context, r slog.Record) error {
	switch {
	case r.Message == "seqby: maintenance pass":
		p := pass{at: r.Time}
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "took":
				p.took = a.Value.Duration()
			case "partitions":
				p.partitions = a.Value.Int64()
			case "reaped":
				p.reaped = a.Value.Int64()
			}
			return true
		})
		l.mu.Lock()
		l.passes = append(l.passes, p)
		l.mu.Unlock()
	case strings.HasPrefix(r.Message, "seqby: maintenance leader lost its lease"):
		l.losses.Add(1)
	case strings.HasPrefix(r.Message, "seqby: leading maintenance"):
		l.leads.Add(1)
	}
	return nil
}

func (l *passLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *passLog) WithGroup(string) slog.Handler      { return l }

// between returns the passes logged from start to end.
func (l *passLog) between(start, end time.Time) []pass {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []pass
	for _, p := range l.passes {
		if !p.at.Before(start) && !p.at.After(end) {
			out = append(out, p)
		}
	}
	return out
}
