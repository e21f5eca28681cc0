package inspect

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Partitions lists the partitions of every category handler reads, sorted
// by category and key: for each, its lease holder and generation, the
// handler's pending entries and lag, how long its head has waited,
// whether it is halted and how long since its newest entry, and whether
// an operator paused it (or the whole handler). An unpartitioned
// category's stream is one row with an empty key. It reads the
// categories' indexes whole and pipelines a few commands per partition:
// an operator's call, whose cost grows with the partitions (PartitionPage
// reads one page of them). An unknown handler is an error matching
// ErrUnknownHandler.
func (i *Inspector) Partitions(ctx context.Context, handler string) ([]PartitionInfo, error) {
	rows, err := i.partitionRows(ctx, handler, true)
	if err != nil {
		return nil, err
	}
	return i.describe(ctx, handler, rows)
}

// PageQuery selects a page of a handler's partitions for PartitionPage.
type PageQuery struct {
	// Search keeps the partitions whose key contains it; "" keeps all.
	Search string
	// Offset skips that many matching partitions; Limit bounds the page
	// (100 when 0 or less).
	Offset, Limit int
}

// PartitionPage is one page of a handler's partitions.
type PartitionPage struct {
	Partitions []PartitionInfo `json:"partitions"` // the page, by category and key
	Total      int             `json:"total"`      // partitions matching the query
}

// PartitionPage describes one page of handler's keyed partitions, in
// Partitions' order (category, then key), those whose key contains
// q.Search. It reads the categories' indexes (keys only) and the
// handler's halt and pause records whole, and describes only the page's
// partitions: at 100,000 partitions a fraction of what Partitions costs
// (docs/benchmarks.md). Unpartitioned categories' streams are not rows
// here (Partitions lists them). An unknown handler is an error matching
// ErrUnknownHandler.
func (i *Inspector) PartitionPage(ctx context.Context, handler string, q PageQuery) (PartitionPage, error) {
	rows, err := i.partitionRows(ctx, handler, false)
	if err != nil {
		return PartitionPage{}, err
	}
	if q.Search != "" {
		rows = slices.DeleteFunc(rows, func(p PartitionInfo) bool { return !strings.Contains(p.Key, q.Search) })
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	lo := min(max(q.Offset, 0), len(rows))
	page, err := i.describe(ctx, handler, rows[lo:min(lo+q.Limit, len(rows))])
	if err != nil {
		return PartitionPage{}, err
	}
	return PartitionPage{Partitions: page, Total: len(rows)}, nil
}

// partitionRows lists handler's partitions by category and key, named
// and not described yet; with unpartitioned, a category without
// partitions is one row with an empty key.
func (i *Inspector) partitionRows(ctx context.Context, handler string, unpartitioned bool) ([]PartitionInfo, error) {
	h, err := i.Handler(ctx, handler)
	if err != nil {
		return nil, err
	}
	var out []PartitionInfo
	for _, cat := range h.Categories {
		keys, err := rdb.Partitions(ctx, i.c, cat)
		if err != nil {
			return nil, fmt.Errorf("list the partitions of %s: %w", cat, err)
		}
		if len(keys) == 0 && unpartitioned {
			// Unpartitioned (or every partition reaped): its stream, if
			// it exists, is the one place entries wait.
			out = append(out, PartitionInfo{Category: cat, Stream: cat})
			continue
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, PartitionInfo{Category: cat, Key: k, Stream: rdb.PartitionStream(cat, k)})
		}
	}
	return out, nil
}

// describe fills in rows (named by partitionRows) from Redis, and drops
// an unpartitioned row whose stream does not exist.
func (i *Inspector) describe(ctx context.Context, handler string, rows []PartitionInfo) ([]PartitionInfo, error) {
	out := []PartitionInfo{}
	if len(rows) == 0 {
		return out, nil
	}
	halts, err := rdb.Halts(ctx, i.c, handler, !i.readOnly)
	if err != nil {
		return nil, err
	}
	paused, err := rdb.PausedMarks(ctx, i.c, handler, !i.readOnly)
	if err != nil {
		return nil, err
	}
	_, handlerPaused, err := rdb.GetPause(ctx, i.c, rdb.ControlKey(handler))
	if err != nil {
		return nil, fmt.Errorf("read the handler's pause: %w", err)
	}
	// Entry ids carry Redis's clock, so idle time is measured on it too.
	now, err := i.c.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("read Redis's clock: %w", err)
	}
	var lanes []string // two per partition: its stream and its backfill lane
	for _, p := range rows {
		if p.Key == "" {
			lanes = append(lanes, p.Stream, "")
		} else {
			lanes = append(lanes, p.Stream, rdb.SubStream(p.Stream, i.backfillSuffix()))
		}
	}
	var ask []string
	for _, l := range lanes {
		if l != "" {
			ask = append(ask, l)
		}
	}
	stats, err := rdb.LanesStats(ctx, i.c, handler, ask)
	if err != nil {
		return nil, err
	}
	byStream := make(map[string]rdb.LaneStats, len(stats))
	for _, s := range stats {
		byStream[s.Stream] = s
	}
	var leaseKeys []string // two per keyed partition: keyed and pm lease
	for _, p := range rows {
		if p.Key != "" {
			leaseKeys = append(leaseKeys, rdb.LeaseKey(p.Stream, handler), rdb.PMLeaseKey(handler, p.Key))
		}
	}
	tokens, err := rdb.Strings(ctx, i.c, leaseKeys)
	if err != nil {
		return nil, fmt.Errorf("read the leases: %w", err)
	}
	age := func(id string) (time.Duration, bool) {
		ms, ok := idMillis(id)
		if !ok || ms <= 0 {
			return 0, false
		}
		return max(0, now.Sub(time.UnixMilli(ms))), true
	}
	for j, p := range rows {
		p.Idle, p.HeadAge = -1, -1
		exists := false
		for _, l := range lanes[2*j : 2*j+2] {
			st, ok := byStream[l]
			if l == "" || !ok || !st.Exists {
				continue
			}
			exists = true
			p.Pending += st.Pending
			p.Lag += st.Lag
			if idle, ok := age(st.LastID); ok && (p.Idle < 0 || idle < p.Idle) {
				p.Idle = idle
			}
			if head, ok := age(st.HeadID); ok && head > p.HeadAge {
				p.HeadAge = head
			}
		}
		if p.Key == "" {
			if exists {
				out = append(out, p)
			}
			continue
		}
		token := tokens[0]
		if token == "" {
			token = tokens[1]
		}
		tokens = tokens[2:]
		if token != "" {
			// A token that does not parse is shown whole as the owner.
			p.Owner = token
			if owner, gen, err := rdb.ParseToken(token); err == nil {
				p.Owner, p.Generation = owner, gen
			}
		}
		keyedMeta, pmMeta := rdb.MetaKey(rdb.LeaseKey(p.Stream, handler)), rdb.MetaKey(rdb.PMLeaseKey(handler, p.Key))
		_, keyed := halts[keyedMeta]
		_, pm := halts[pmMeta]
		p.Halted = keyed || pm
		_, keyedPause := paused[keyedMeta]
		_, pmPause := paused[pmMeta]
		p.Paused = keyedPause || pmPause || handlerPaused
		out = append(out, p)
	}
	return out, nil
}

// idMillis returns the millisecond part of a stream entry id.
func idMillis(id string) (int64, bool) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, err == nil
}
