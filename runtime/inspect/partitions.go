package inspect

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Partitions lists the partitions of every category handler reads, sorted
// by category and key: for each, its lease holder and generation, the
// handler's pending entries and lag, whether it is halted and how long
// since its newest entry, and whether an operator paused it (or the whole
// handler). An unpartitioned category's stream is one row
// with an empty key. It reads the categories' indexes whole and pipelines
// a few commands per partition: an operator's call. An unknown handler is
// an error matching ErrUnknownHandler.
func (i *Inspector) Partitions(ctx context.Context, handler string) ([]PartitionInfo, error) {
	h, err := i.Handler(ctx, handler)
	if err != nil {
		return nil, err
	}
	halts, err := rdb.Halts(ctx, i.c, handler)
	if err != nil {
		return nil, err
	}
	paused, err := rdb.PausedMarks(ctx, i.c, handler)
	if err != nil {
		return nil, err
	}
	handlerPaused, err := i.c.Exists(ctx, rdb.HandlerPauseKey(handler)).Result()
	if err != nil {
		return nil, fmt.Errorf("read the handler's pause: %w", err)
	}
	// Entry ids carry Redis's clock, so idle time is measured on it too.
	now, err := i.c.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("read Redis's clock: %w", err)
	}
	out := []PartitionInfo{}
	var lanes []string // two per partition: its stream and its backfill lane
	for _, cat := range h.Categories {
		keys, err := rdb.Partitions(ctx, i.c, cat)
		if err != nil {
			return nil, fmt.Errorf("list the partitions of %s: %w", cat, err)
		}
		if len(keys) == 0 {
			// Unpartitioned (or every partition reaped): its stream, if
			// it exists, is the one place entries wait.
			out = append(out, PartitionInfo{Category: cat, Stream: cat})
			lanes = append(lanes, cat, "")
			continue
		}
		sort.Strings(keys)
		for _, k := range keys {
			s := rdb.PartitionStream(cat, k)
			out = append(out, PartitionInfo{Category: cat, Key: k, Stream: s})
			lanes = append(lanes, s, rdb.SubStream(s, i.backfillSuffix()))
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
	for _, p := range out {
		if p.Key != "" {
			leaseKeys = append(leaseKeys, rdb.LeaseKey(p.Stream, handler), rdb.PMLeaseKey(handler, p.Key))
		}
	}
	tokens, err := rdb.Strings(ctx, i.c, leaseKeys)
	if err != nil {
		return nil, fmt.Errorf("read the leases: %w", err)
	}
	kept := out[:0]
	for j := range out {
		p := &out[j]
		p.Idle = -1
		exists := false
		for _, l := range lanes[2*j : 2*j+2] {
			st, ok := byStream[l]
			if l == "" || !ok || !st.Exists {
				continue
			}
			exists = true
			p.Pending += st.Pending
			p.Lag += st.Lag
			if ms, ok := idMillis(st.LastID); ok && ms > 0 {
				idle := max(0, now.Sub(time.UnixMilli(ms)))
				if p.Idle < 0 || idle < p.Idle {
					p.Idle = idle
				}
			}
		}
		if p.Key == "" {
			if exists {
				kept = append(kept, *p)
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
		_, keyed := halts[rdb.HaltKey(p.Stream, handler)]
		_, pm := halts[rdb.PMHaltKey(handler, p.Key)]
		p.Halted = keyed || pm
		_, keyedPause := paused[rdb.PauseKey(rdb.LeaseKey(p.Stream, handler))]
		_, pmPause := paused[rdb.PauseKey(rdb.PMLeaseKey(handler, p.Key))]
		p.Paused = keyedPause || pmPause || handlerPaused > 0
		kept = append(kept, *p)
	}
	return kept, nil
}

// idMillis returns the millisecond part of a stream entry id.
func idMillis(id string) (int64, bool) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, err == nil
}
