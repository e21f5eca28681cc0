package rdb

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reaping removes a cold partition (docs/operating.md, "Reaping"): its lanes, their
// groups, generations and a stale halt record go, and its key leaves the
// category's index. The index lives in the category's slot and the lanes
// in the key's, so no one script can do both; the steps are ordered so
// that no entry is ever left in a lane whose key neither the index nor the
// reaping set holds, even when the reaper dies between two steps:
//
//  1. reap.lua, in the partition's slot, checks that the lanes are cold
//     (empty, nothing pending, idle long enough) and that no lease of any
//     group is held, and deletes them. A publish that appended before it
//     keeps the partition.
//  2. SMOVE takes the key from the index to the reaping set
//     (ReapingKey); discovery reads both sets, so the partition stays
//     visible.
//  3. EXISTS on the lanes: a publish that appended after step 1 recreated
//     a lane, and the key goes back to the index; otherwise it leaves the
//     reaping set. A publish appending after this check adds the key to
//     the index after step 2 (on a single Redis with its entry, in one
//     transaction; on a cluster again after appending; see Publish).
//
// A reaper that dies after step 2 leaves the key in the reaping set, still
// visible; the next reaper of the category settles it (SettleReaping).
//
// Two reapers may run at once (a stalled leader that lost its lease
// finishes the step in flight; during a rolling deploy, engines of a
// release before the maintenance leader reap their categories under a
// lease per category beside the new leader), so no step may rest on being
// the only reaper. Step 1 checks and deletes in one script against
// acquires and publishes (an acquire refuses cold lanes, reap.lua keeps a
// partition any lease is held on, or acquired within the idle time), and
// run twice it finds nothing left. Steps 2 and 3 can interleave with
// another reaper's: reaper A finds no lane (step 3), a publish recreates
// one and indexes the key, reaper B moves the key to the reaping set
// (step 2), and A takes it out of the reaping set. B's own step 3 puts it
// back, unless B dies first; so a reaper that took a key out of the
// reaping set looks at its lanes once more, and indexes it again when
// one exists (settle). A publish after that look indexes the key itself.

// Reap reaps category's partition key when it is cold for idle and no
// lease of groups (the category's registered groups) is held, and reports
// whether it did. A group found on a lane but missing from groups is added
// and its leases checked too.
//
// A pm's state on the key (StateKey; a pm's group is named after the pm)
// is kept, but its applied marks of the deleted lanes are blanked in the
// same script: the lanes' next entries, once a publish recreates them,
// get ids from the server clock alone, which after a clock step-back (or
// a failover to a server whose clock is behind) may lie below the old
// mark, and the pm would ack them without applying them. Every group that
// ever read the category is registered (the registry never forgets one),
// and one of another build still on a lane is found there, so every mark
// of the lanes is reached. A state on another Redis or in a custom store
// is not; a RedisStateStore's fenced saves work only on the engine's
// Redis anyway, as the fence is the pm lease.
//
// backfill lists the suffixes of the partition's backfill lanes, one per
// BackfillSuffix the engines reading the category use (a reaper of
// another engine's category must know its lanes, or it would reap the
// stream beside a backfill lane holding entries).
func Reap(ctx context.Context, c redis.UniversalClient, category, key string, backfill, groups []string, idle time.Duration) (bool, error) {
	stream := PartitionStream(category, key)
	lanes := partitionLanes(category, key, backfill)
	groups = append([]string(nil), groups...)
	for range 3 {
		keys := append([]string(nil), lanes...)
		args := []any{idle.Milliseconds(), len(lanes)}
		for _, l := range lanes {
			args = append(args, AppliedField(l))
		}
		for _, g := range groups {
			lease, pm := LeaseKey(stream, g), PMLeaseKey(g, key)
			keys = append(keys, lease, pm, MetaKey(lease), MetaKey(pm),
				legacyGenerationKey(stream, g), legacyPMGenerationKey(g, key), legacyHaltKey(stream, g), legacyPauseKey(lease), legacyPauseKey(pm))
			args = append(args, g)
		}
		keys = append(keys, WakeKey(stream))
		res, err := scriptReap.Run(ctx, c, keys, args...).Slice()
		if err != nil {
			return false, fmt.Errorf("reap %s: %w", stream, err)
		}
		if len(res) == 0 {
			return false, fmt.Errorf("reap %s: empty reply", stream)
		}
		switch res[0] {
		case int64(0):
			return false, nil
		case int64(1):
			if err := c.SMove(ctx, IndexKey(category), ReapingKey(category), key).Err(); err != nil {
				return true, fmt.Errorf("reap %s: move the key to the reaping set: %w", stream, err)
			}
			return true, settle(ctx, c, category, key, lanes)
		}
		for _, g := range res[1:] {
			groups = append(groups, fmt.Sprint(g))
		}
	}
	return false, fmt.Errorf("reap %s: its groups kept changing; try again", stream)
}

// settle ends a reap after its key is in the reaping set: back to the
// index when a lane exists (a publish recreated it), else out of the
// reaping set, and back to the index should a lane exist by then.
func settle(ctx context.Context, c redis.UniversalClient, category, key string, lanes []string) error {
	n, err := c.Exists(ctx, lanes...).Result()
	if err != nil {
		return fmt.Errorf("reap %s: check its lanes: %w", lanes[0], err)
	}
	if n == 0 {
		if err = c.SRem(ctx, ReapingKey(category), key).Err(); err == nil {
			// Another reaper may have moved the key here after a publish
			// this check came before (see Reaping above): look again.
			if n, err = c.Exists(ctx, lanes...).Result(); err == nil && n > 0 {
				err = c.SAdd(ctx, IndexKey(category), key).Err()
			}
		}
	} else {
		// Added before it is removed: a reaper dying in between leaves the
		// key in both sets, which is harmless.
		_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.SAdd(ctx, IndexKey(category), key)
			p.SRem(ctx, ReapingKey(category), key)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("reap %s: settle the index: %w", lanes[0], err)
	}
	return nil
}

// partitionLanes are a partition's stream and its backfill lane of each
// suffix in backfill.
func partitionLanes(category, key string, backfill []string) []string {
	lanes := []string{PartitionStream(category, key)}
	for _, sfx := range backfill {
		lanes = append(lanes, BackfillStream(category, key, sfx))
	}
	return lanes
}

// SettleReaping finishes the reaps of category an earlier reaper left in
// the reaping set, and returns how many it found; backfill is as for
// Reap.
func SettleReaping(ctx context.Context, c redis.UniversalClient, category string, backfill []string) (int, error) {
	keys, err := c.SMembers(ctx, ReapingKey(category)).Result()
	if err != nil {
		return 0, fmt.Errorf("read the reaping set of %s: %w", category, err)
	}
	for _, k := range keys {
		if err := settle(ctx, c, category, k, partitionLanes(category, k, backfill)); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// Groups returns the consumer groups registered for category (GroupsKey).
func Groups(ctx context.Context, c redis.UniversalClient, category string) ([]string, error) {
	groups, err := c.HKeys(ctx, GroupsKey(category)).Result()
	if err != nil {
		return nil, fmt.Errorf("read the groups of %s: %w", category, err)
	}
	return groups, nil
}

// ReapCategory is a category to reap: how long its partitions must stay
// cold first, and the suffixes of their backfill lanes.
type ReapCategory struct {
	Category  string
	ReapAfter time.Duration
	Backfill  []string
}

// reapMember is one engine's announcement of a category, a member of
// ReapCategoriesKey (JSON, so any category or suffix fits, and one
// engine's announcements are the same string each time).
type reapMember struct {
	Category  string `json:"c"`
	ReapAfter int64  `json:"a"` // milliseconds
	Backfill  string `json:"b"`
}

// AnnounceReap records, in ReapCategoriesKey, that this engine wants
// cats reaped (each with one backfill suffix, its own), and returns every
// category any engine announced within ttl (the maintenance leader reaps
// them), each with the largest ReapAfter and every backfill suffix
// announced for it, sorted by category. An engine announces more often
// than ttl; an announcement not repeated for ttl is dropped, and the set
// expires ttl after the last one (reap_categories.lua). With no cats it
// only lists.
func AnnounceReap(ctx context.Context, c redis.UniversalClient, cats []ReapCategory, ttl time.Duration) ([]ReapCategory, error) {
	args := []any{ttl.Milliseconds()}
	for _, rc := range cats {
		for _, sfx := range rc.Backfill {
			m, err := json.Marshal(reapMember{Category: rc.Category, ReapAfter: rc.ReapAfter.Milliseconds(), Backfill: sfx})
			if err != nil {
				return nil, fmt.Errorf("announce the categories to reap: %w", err)
			}
			args = append(args, string(m))
		}
	}
	members, err := scriptReapCategories.Run(ctx, c, []string{ReapCategoriesKey}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("announce the categories to reap: %w", err)
	}
	byCat := map[string]*ReapCategory{}
	for _, raw := range members {
		var m reapMember
		if json.Unmarshal([]byte(raw), &m) != nil || m.Category == "" || m.Backfill == "" {
			continue // not written by AnnounceReap: nothing to reap
		}
		rc := byCat[m.Category]
		if rc == nil {
			rc = &ReapCategory{Category: m.Category}
			byCat[m.Category] = rc
		}
		rc.ReapAfter = max(rc.ReapAfter, time.Duration(m.ReapAfter)*time.Millisecond)
		if !slices.Contains(rc.Backfill, m.Backfill) {
			rc.Backfill = append(rc.Backfill, m.Backfill)
		}
	}
	out := make([]ReapCategory, 0, len(byCat))
	for _, rc := range byCat {
		sort.Strings(rc.Backfill)
		out = append(out, *rc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Category < out[j].Category })
	return out, nil
}

// EndLegacyReaper gives the generation counter of category's reaper lease
// of releases before the maintenance leader ("{category}:__reapergen__",
// written without a TTL) a TTL, so it ends once no engine of such a
// release takes that lease: their acquires set it again without a TTL,
// and the next call gives it one again. The lease itself
// ("{category}:__reaper__") always had a TTL. Losing the counter early
// is harmless: an acquire then takes the Redis time as its generation.
func EndLegacyReaper(ctx context.Context, c redis.UniversalClient, category string, ttl time.Duration) error {
	if err := c.PExpire(ctx, legacyReaperGeneration(category), ttl).Err(); err != nil {
		return fmt.Errorf("end the reaper lease counter of %s: %w", category, err)
	}
	return nil
}
