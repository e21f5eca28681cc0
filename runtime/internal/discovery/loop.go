package discovery

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// Run runs a discovery cycle for each of handlers every
// DiscoveryInterval until stop; the workers it starts count in wg. After
// every round of cycles it calls fans (unless nil), whatever the cycles
// did: the engine starts and stops its unkeyed handlers' workers on
// partitioned categories there.
func (d *Discovery) Run(base context.Context, stop <-chan struct{}, handlers []Handler, fans func(), wg *sync.WaitGroup) {
	names := make([]string, len(handlers))
	for i, h := range handlers {
		names[i] = h.Name
	}
	t := time.NewTicker(d.cfg.DiscoveryInterval)
	defer t.Stop()
	// Announce first and claim one cycle later, so instances started
	// together see each other before claiming, instead of the first one
	// taking everything and handing most of it over again.
	d.cfg.Members.Announce(base, names)
	settled := len(handlers) == 0
	for {
		for _, h := range handlers {
			switch {
			case !settled:
			case h.PM:
				d.balancePM(base, stop, h, wg)
			default:
				d.balance(base, stop, h, wg)
			}
		}
		settled = true
		d.pruneCold()
		d.cfg.Members.PruneFaults()
		if fans != nil {
			fans()
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// unit is one claimable partition of a handler: a keyed handler's
// partition stream, or a sequential pm's correlation value.
type unit struct {
	id    string
	ref   rdb.LeaseRef
	key   string
	cats  []string // the categories the lanes belong to
	lanes []string // the streams the lease covers
}

// balance is one discovery cycle for a keyed handler: its partitions are
// the streams in its categories' indexes.
func (d *Discovery) balance(base context.Context, stop <-chan struct{}, h Handler, wg *sync.WaitGroup) {
	suffix := d.cfg.BackfillSuffix
	list := func(ctx context.Context) ([]unit, error) {
		var units []unit
		for _, cat := range h.Categories {
			keys, err := d.cfg.Index.Partitions(ctx, cat)
			if err != nil {
				return nil, fmt.Errorf("reading the partition index of %s: %w", cat, err)
			}
			d.warnSize(cat, len(keys))
			for _, k := range keys {
				if d.cfg.KeyRule(cat, "", k, suffix) != nil {
					continue
				}
				stream := rdb.PartitionStream(cat, k)
				units = append(units, unit{id: worker.PartitionID(h.Name, stream), ref: rdb.PartitionLease(stream, h.Name), key: k,
					cats: []string{cat}, lanes: []string{stream, rdb.BackfillStream(cat, k, suffix)}})
			}
		}
		return units, nil
	}
	wh := worker.Handler{Name: h.Name, AckBatch: h.AckBatch}
	d.cycle(base, stop, h.Name, wg, list, func(u unit, l rdb.Lease, sent time.Time) *worker.Worker {
		return d.cfg.Workers.Keyed(base, wh, u.cats[0], u.key, l, sent)
	})
}

// balancePM is one discovery cycle for a sequential pm: its correlation
// values are the union of its categories' indexes (a value appears as soon
// as any category has a stream for it). Like balance for a keyed handler,
// it moves this instance's share toward ceil(values / live members).
func (d *Discovery) balancePM(base context.Context, stop <-chan struct{}, h Handler, wg *sync.WaitGroup) {
	cats, suffix := h.Categories, d.cfg.BackfillSuffix
	list := func(ctx context.Context) ([]unit, error) {
		seen := map[string]bool{}
		var units []unit
		for _, cat := range cats {
			keys, err := d.cfg.Index.Partitions(ctx, cat)
			if err != nil {
				return nil, fmt.Errorf("reading the partition index of %s: %w", cat, err)
			}
			d.warnSize(cat, len(keys))
			for _, k := range keys {
				if seen[k] || d.cfg.KeyRule(cat, "", k, suffix) != nil {
					continue
				}
				seen[k] = true
				var lanes []string
				for _, c := range cats {
					lanes = append(lanes, rdb.PartitionStream(c, k))
				}
				for _, c := range cats {
					lanes = append(lanes, rdb.BackfillStream(c, k, suffix))
				}
				units = append(units, unit{id: worker.PMPartitionID(h.Name, k), ref: rdb.PMLease(h.Name, k, lanes[:len(cats)]), key: k, cats: cats, lanes: lanes})
			}
		}
		return units, nil
	}
	wh := worker.Handler{Name: h.Name, AckBatch: h.AckBatch}
	d.cycle(base, stop, h.Name, wg, list, func(u unit, l rdb.Lease, sent time.Time) *worker.Worker {
		return d.cfg.Workers.PM(base, wh, cats, u.key, l, sent)
	})
}

// sizeWarnEvery is how often the warning about a category with too many
// partitions repeats while it stays above the threshold.
const sizeWarnEvery = 10 * time.Minute

// largeCategory is a category above PartitionWarnThreshold.
type largeCategory struct {
	partitions int
	warned     time.Time
}

// warnSize records a category's partition count at discovery and warns
// when it crosses PartitionWarnThreshold, then every sizeWarnEvery while
// it stays above; Large shows the categories above it. The map is bounded
// by the registered categories.
func (d *Discovery) warnSize(category string, n int) {
	d.mu.Lock()
	if n <= d.cfg.PartitionWarnThreshold {
		delete(d.large, category)
		d.mu.Unlock()
		return
	}
	l, ok := d.large[category]
	warn := !ok || time.Since(l.warned) >= sizeWarnEvery
	if warn {
		l.warned = time.Now()
	}
	l.partitions = n
	d.large[category] = l
	d.mu.Unlock()
	if warn {
		d.cfg.Log.Warn("seqby: category has many partitions; partitioned streams suit bounded key sets (tenants, accounts), not per-entity ids",
			"category", category, "partitions", n, "threshold", d.cfg.PartitionWarnThreshold)
	}
}
