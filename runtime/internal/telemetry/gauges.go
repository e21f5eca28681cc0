package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Snapshot is the engine's state the gauges report, taken at each
// collection (Config.Snapshot).
type Snapshot struct {
	// Handlers are the keyed handlers that run: each gets its
	// per-handler gauges, zeros included.
	Handlers []string
	// Owned and Paused count, per handler, the partitions this instance
	// holds, and those of them paused (the partition or its handler).
	Owned, Paused map[string]int
	// Busy are the held partitions with work (a Lag that is set).
	Busy []Work
	// Index is the partition count of each category's kept index.
	Index map[string]int
}

// Work is one held partition with work, as its Lag last saw it.
type Work struct {
	// Handler, Category and Key name the partition in the gauges'
	// attributes; a pm's Category lists its categories, as in LeaseInfo.
	Handler, Category, Key string
	// Lanes are the partition's streams, whose backlog Redis is asked
	// for when More.
	Lanes []string
	// Oldest, Backlog and More are what Lag.Load returns.
	Oldest, Backlog int64
	More            bool
}

// gauges are the observable instruments, observed together.
type gauges struct {
	owned, halted, paused, lag, backlog, hlag, hbacklog, index metric.Float64ObservableGauge
}

// Observe starts reporting the gauges at each collection, until the
// returned registration is unregistered (when Run returns).
func (t *Telemetry) Observe() (metric.Registration, error) {
	g := t.gauges
	return t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		t.observe(ctx, o)
		return nil
	}, g.owned, g.halted, g.paused, g.lag, g.backlog, g.hlag, g.hbacklog, g.index)
}

// observeTimeout bounds the Redis reads of one collection.
const observeTimeout = 2 * time.Second

// observe reports the gauges. Owned counts, lag ages and index sizes are
// this instance's own; the backlog of a partition whose last read was
// full, and the halted counts, are read from Redis (a pipelined XINFO
// GROUPS per such lane, an SCARD per handler), so a collection costs
// nothing per idle partition.
func (t *Telemetry) observe(ctx context.Context, o metric.Observer) {
	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	g := t.gauges
	now := time.Now()
	var s Snapshot
	if t.cfg.Snapshot != nil {
		s = t.cfg.Snapshot()
	}
	type work struct {
		w       Work
		age     time.Duration
		backlog int64
	}
	busy := make([]work, len(s.Busy))
	for i, w := range s.Busy {
		busy[i] = work{w, max(now.Sub(time.UnixMilli(w.Oldest)), 0), w.Backlog}
	}

	// A full last read leaves entries in Redis beyond those read: ask
	// Redis for those partitions' backlog, per handler (its group).
	more := map[string][]int{}
	for i, w := range busy {
		if w.w.More {
			more[w.w.Handler] = append(more[w.w.Handler], i)
		}
	}
	for group, idx := range more {
		var streams []string
		for _, i := range idx {
			streams = append(streams, busy[i].w.Lanes...)
		}
		n, ok, err := rdb.Backlog(ctx, t.cfg.Client, group, streams)
		if err != nil {
			t.cfg.Log.Debug("seqby: reading the backlog for metrics failed", "handler", group, "err", err)
			continue
		}
		at := 0
		for _, i := range idx {
			sum, known := int64(0), true
			for range busy[i].w.Lanes {
				sum, known = sum+n[at], known && ok[at]
				at++
			}
			if known {
				busy[i].backlog = max(sum, busy[i].backlog)
			}
		}
	}

	hlag, hbacklog := map[string]float64{}, map[string]int64{}
	for _, w := range busy {
		h := w.w.Handler
		attrs := metric.WithAttributes(AttrHandler.String(h), AttrCategory.String(w.w.Category), AttrKey.String(w.w.Key))
		o.ObserveFloat64(g.lag, w.age.Seconds(), attrs)
		o.ObserveFloat64(g.backlog, float64(w.backlog), attrs)
		hlag[h] = max(hlag[h], w.age.Seconds())
		hbacklog[h] += w.backlog
	}
	for _, h := range s.Handlers {
		attrs := metric.WithAttributes(AttrHandler.String(h))
		o.ObserveFloat64(g.owned, float64(s.Owned[h]), attrs)
		o.ObserveFloat64(g.paused, float64(s.Paused[h]), attrs)
		o.ObserveFloat64(g.hlag, hlag[h], attrs)
		o.ObserveFloat64(g.hbacklog, float64(hbacklog[h]), attrs)
	}
	if counts, err := rdb.HaltCounts(ctx, t.cfg.Client, s.Handlers); err != nil {
		t.cfg.Log.Debug("seqby: counting halted partitions for metrics failed", "err", err)
	} else {
		for i, h := range s.Handlers {
			o.ObserveFloat64(g.halted, float64(counts[i]), metric.WithAttributes(AttrHandler.String(h)))
		}
	}
	for cat, n := range s.Index {
		o.ObserveFloat64(g.index, float64(n), metric.WithAttributes(AttrCategory.String(cat)))
	}
}
