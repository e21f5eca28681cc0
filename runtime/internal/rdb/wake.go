package rdb

import (
	"context"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// A publish wakes the owners of the partition it wrote to, not every
// instance: after appending, it reads the partition's wake hash (WakeKey:
// group -> owner incarnation, written by acquire.lua) and appends the
// signal to each owner's stream (OwnerSignalKey), which only that engine
// reads. The category's stream (SignalKey), which every engine reads,
// gets the signal instead when an owner may not be named there:
//   - the key joined the index with this publish (a new partition, which
//     discovery learns of from that signal: see the engine's index cache);
//   - no group's owner is named (the partition is unowned, or its owners
//     run a version that writes no wake hash), or a group wants it and
//     nobody holds it (an acquire found it cold: the field is "");
//   - an engine runs an unkeyed handler on the category (FanoutKey): every
//     instance reads every partition then;
//   - reading the hash or the marker failed;
//   - an owner's stream is gone (its engine stopped or was killed: the
//     append does not create it) or refused, then in a second round trip;
//   - the publish is an operator's replay from a dead-letter stream (rare,
//     and it needs no owner).
//
// A signal never precedes its entry: both reads run after the append, and
// the signals after the reads. An owner whose read of the partition
// missed the entry held the lease when it read; if it still holds it
// after the append, the hash names it (acquire.lua wrote it before that
// read), and an owner that took the lease since read after the append.

// OwnerSignalTTL is how long an engine's signal stream outlives its last
// heartbeat: the engine creates it at Run and renews it each heartbeat,
// and publishers never create it (XADD NOMKSTREAM), so a killed
// instance's stream ends this long after it stopped.
const OwnerSignalTTL = 10 * time.Minute

// wakeup is what one publish learnt about whom to wake for a partition.
type wakeup struct {
	category, key string
	// fresh: the key joined the index with this publish.
	fresh  bool
	fanout *redis.IntCmd
	owners *redis.StringSliceCmd
}

// queueFanout queues the read of category's fanout marker (FanoutKey).
func queueFanout(ctx context.Context, pipe redis.Cmdable, category string) *redis.IntCmd {
	return pipe.Exists(ctx, FanoutKey(category))
}

// queueOwners queues the read of the partition's wake hash.
func queueOwners(ctx context.Context, pipe redis.Cmdable, category, key string) *redis.StringSliceCmd {
	return pipe.HVals(ctx, WakeKey(PartitionStream(category, key)))
}

// everyone reports whether the category's stream must carry the signal.
func (w wakeup) everyone() bool {
	if w.fresh || w.fanout == nil || w.owners == nil || w.fanout.Err() != nil || w.fanout.Val() > 0 {
		return true
	}
	if w.owners.Err() != nil || len(w.owners.Val()) == 0 {
		return true
	}
	return slices.Contains(w.owners.Val(), "")
}

// signal appends the wake-ups of ws and returns the first error: one
// pipeline, and a second for the partitions an owner's stream of which
// was gone.
func signal(ctx context.Context, c redis.UniversalClient, ws []wakeup, maxLen int64) error {
	toAll := func(pipe redis.Pipeliner, w wakeup) redis.Cmder {
		return pipe.XAdd(ctx, &redis.XAddArgs{Stream: SignalKey(w.category), MaxLen: maxLen, Approx: true,
			Values: []any{"k", w.key}})
	}
	var cmds []redis.Cmder
	var direct []*redis.StringCmd
	var of []int // the wakeup of each direct signal
	c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, w := range ws {
			if w.everyone() {
				cmds = append(cmds, toAll(pipe, w)) // every engine reads it, the owners too
				continue
			}
			seen := map[string]bool{}
			for _, o := range w.owners.Val() {
				if seen[o] {
					continue // one owner of several groups of the partition
				}
				seen[o] = true
				direct = append(direct, pipe.XAdd(ctx, &redis.XAddArgs{Stream: OwnerSignalKey(o), NoMkStream: true,
					MaxLen: maxLen, Approx: true, Values: []any{"c", w.category, "k", w.key}}))
				of = append(of, i)
			}
		}
		return nil
	})
	// An owner's stream gone (nil: NOMKSTREAM), or refused (an ACL without
	// seqby:__wake__:*), wakes everyone instead.
	var gone []int
	for j, cmd := range direct {
		if cmd.Err() != nil && (len(gone) == 0 || gone[len(gone)-1] != of[j]) {
			gone = append(gone, of[j])
		}
	}
	if len(gone) > 0 {
		c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, i := range gone {
				cmds = append(cmds, toAll(pipe, ws[i]))
			}
			return nil
		})
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}
