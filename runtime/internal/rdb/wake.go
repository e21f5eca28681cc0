package rdb

import (
	"context"
	"slices"
	"sync"
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
// The exception is a stream that did not exist at the acquire (a pm's
// category first published to for its value later): acquire.lua named
// nobody there. Its first publish wakes every instance (the key is new,
// or the hash names nobody), and the owner names itself at its first
// read of the stream (name.lua), before it handles the entry; until then
// a publish may signal other owners only, so the owner reads once more
// after naming itself, and a renewal that names it (renew_many.lua, for
// an owner that has not read the stream yet) wakes it once (package
// lease's wake names).

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

// target is whom one publish wakes for a partition: every instance
// (the category's stream), or the owners named.
type target struct {
	category, key string
	everyone      bool
	owners        []string // distinct
}

// target is whom w's reads say to wake.
func (w wakeup) target() target {
	t := target{category: w.category, key: w.key}
	if w.fresh || w.fanout == nil || w.owners == nil || w.fanout.Err() != nil || w.fanout.Val() > 0 ||
		w.owners.Err() != nil || len(w.owners.Val()) == 0 || slices.Contains(w.owners.Val(), "") {
		t.everyone = true
		return t
	}
	for _, o := range w.owners.Val() {
		if !slices.Contains(t.owners, o) { // one owner of several groups of the partition
			t.owners = append(t.owners, o)
		}
	}
	return t
}

// toAll queues t's signal on the category's stream.
func (t target) toAll(ctx context.Context, pipe redis.Cmdable, maxLen int64) *redis.StringCmd {
	return pipe.XAdd(ctx, &redis.XAddArgs{Stream: SignalKey(t.category), MaxLen: maxLen, Approx: true,
		Values: []any{"k", t.key}})
}

// toOwner queues t's signal on owner o's stream, never creating it.
func (t target) toOwner(ctx context.Context, pipe redis.Cmdable, o string, maxLen int64) *redis.StringCmd {
	return pipe.XAdd(ctx, &redis.XAddArgs{Stream: OwnerSignalKey(o), NoMkStream: true,
		MaxLen: maxLen, Approx: true, Values: []any{"c", t.category, "k", t.key}})
}

// signal sends the signals of ts and returns the first error: one
// pipeline, and a second for the targets an owner's stream of which was
// gone (nil: NOMKSTREAM) or refused (an ACL without seqby:__wake__:*),
// which wake everyone instead.
func signal(ctx context.Context, c redis.UniversalClient, ts []target, maxLen int64) error {
	var cmds []redis.Cmder
	var direct []*redis.StringCmd
	var of []int // the target of each direct signal
	c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, t := range ts {
			if t.everyone {
				cmds = append(cmds, t.toAll(ctx, pipe, maxLen)) // every engine reads it, the owners too
				continue
			}
			for _, o := range t.owners {
				direct = append(direct, t.toOwner(ctx, pipe, o, maxLen))
				of = append(of, i)
			}
		}
		return nil
	})
	var gone []int
	for j, cmd := range direct {
		if cmd.Err() != nil && (len(gone) == 0 || gone[len(gone)-1] != of[j]) {
			gone = append(gone, of[j])
		}
	}
	if len(gone) > 0 {
		c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, i := range gone {
				cmds = append(cmds, ts[i].toAll(ctx, pipe, maxLen))
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

// targets is w.target() of each of ws.
func targets(ws []wakeup) []target {
	out := make([]target, len(ws))
	for i, w := range ws {
		out[i] = w.target()
	}
	return out
}

// Guesses remembers, per partition, whom its last publish woke, so that
// the next publish to it on a single Redis sends those signals inside its
// transaction, after the entry, instead of in a second round trip once
// the wake hash is read (Publisher latency: publish to wake-up in one
// round trip while the owners stay the same). The reads still run in the
// transaction: a guess that was wrong costs the signals it missed, in a
// second round trip, and a stale owner one spurious wake-up. It is safe
// for concurrent use and holds at most guessesMax partitions (it forgets
// them all when full).
type Guesses struct {
	mu sync.Mutex
	m  map[string]target
}

const guessesMax = 10000

// NewGuesses returns an empty Guesses.
func NewGuesses() *Guesses { return &Guesses{m: map[string]target{}} }

func (g *Guesses) get(category, key string) (target, bool) {
	if g == nil {
		return target{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.m[category+"\x00"+key]
	return t, ok
}

// put records t for the partition's next publish, or forgets the
// partition when keep is false.
func (g *Guesses) put(t target, keep bool) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	id := t.category + "\x00" + t.key
	if !keep {
		delete(g.m, id)
		return
	}
	if len(g.m) >= guessesMax {
		clear(g.m)
	}
	g.m[id] = t
}

// missed is what a publish that sent guess's signals (replies sent) must
// still send for t: nothing when guess woke everyone or every owner of t
// and each landed; everyone when t is everyone or a guessed owner's
// stream was gone or refused; else the owners of t not guessed.
func missed(t, guess target, sent []*redis.StringCmd) (target, bool) {
	for _, cmd := range sent {
		if cmd.Err() != nil {
			t.everyone, t.owners = true, nil
			return t, true
		}
	}
	if guess.everyone {
		return target{}, false
	}
	if t.everyone {
		return t, true
	}
	var rest []string
	for _, o := range t.owners {
		if !slices.Contains(guess.owners, o) {
			rest = append(rest, o)
		}
	}
	t.owners = rest
	return t, len(rest) > 0
}
