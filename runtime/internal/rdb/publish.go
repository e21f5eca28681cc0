package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Publish appends one entry (fields: name/value pairs) to stream, the
// stream (or backfill lane) of category's partition key. The partition's
// slot and the category's differ, so it takes three steps, in an order
// that never lets a consumer miss the entry, even while the reaper removes
// the partition (Reap):
//
//  1. the key joins the category's index, so discovery knows the
//     partition before it has the entry (an indexed partition without a
//     stream reads as empty, so a publisher that dies here leaves nothing
//     wrong);
//  2. the entry is appended;
//  3. the partition's owners are woken, after the entry, so a woken
//     consumer finds it: a signal with the key is appended to each owner's
//     signal stream, or to the category's (capped at about signalMaxLen;
//     the wake-up rules say which). A publisher that dies before this step leaves
//     the entry to the consumers' periodic re-check.
//
// On a single Redis steps 1 and 2 go in one MULTI/EXEC transaction with
// the reads that choose whom to wake, which runs them in order and runs
// none when one is refused, so the reaper sees the key indexed and the
// entry appended together; the signals follow in a second round trip. On
// a cluster each is its own step, and one that fails stops the publish; a
// reap may then run between steps 1 and 2, so the key is added to the
// index again after the entry: either that lands after the reaper took
// the key out, or the reaper, checking the lanes after taking it out,
// finds the entry and puts the key back (see Reap). So once Publish
// returns nil the key is discoverable. Either way the error names the
// first step that failed, and only an error matching ErrUnsignalled (step
// 3's signal failed) says the entry was appended and indexed.
//
// once, when its Window is set, makes the append idempotent: an entry
// whose message id was appended to the partition within the window is
// not appended again (append_once.lua), and Publish returns nil.
func Publish(ctx context.Context, c redis.UniversalClient, category, key, stream string, signalMaxLen int64, fields []any, once Once) error {
	return PublishGuessing(ctx, c, nil, category, key, stream, signalMaxLen, fields, once)
}

// PublishGuessing is Publish that, on a single Redis, sends the signals
// that guesses holds for the partition inside the transaction (Guesses),
// and records the wake-ups it found for the next publish; a nil guesses
// guesses nothing.
func PublishGuessing(ctx context.Context, c redis.UniversalClient, guesses *Guesses, category, key, stream string, signalMaxLen int64, fields []any, once Once) error {
	if once.DLQ != "" && once.DLQOp == "" {
		once.DLQOp = NewOp()
	}
	index := func(c redis.Cmdable) *redis.IntCmd { return c.SAdd(ctx, IndexKey(category), key) }
	entry := func(c redis.Cmdable) redis.Cmder {
		if once.DLQ != "" {
			keys := []string{stream, once.DLQ, DLQOpKey(once.DLQ, once.DLQID)}
			args := append([]any{once.DLQID, once.DLQOp, OpTTL.Milliseconds()}, fields...)
			if _, tx := c.(redis.Pipeliner); tx {
				return scriptDLQReplay.Eval(ctx, c.(redis.Scripter), keys, args...)
			}
			return scriptDLQReplay.Run(ctx, c.(redis.Scripter), keys, args...)
		}
		if once.Window <= 0 {
			return c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: fields})
		}
		keys := []string{stream, DedupKey(category, key, once.ID)}
		args := append([]any{windowMillis(once.Window)}, fields...)
		if _, tx := c.(redis.Pipeliner); tx {
			// Inside MULTI a missing script cannot fall back to EVAL:
			// NOSCRIPT says it did nothing, and the caller loads it and
			// sends the transaction again.
			return scriptAppendOnce.EvalSha(ctx, c.(redis.Scripter), keys, args...)
		}
		return scriptAppendOnce.Run(ctx, c.(redis.Scripter), keys, args...)
	}
	w := wakeup{category: category, key: key}
	var (
		guess   target
		guessed bool               // guess's signals went in the transaction (a single Redis)
		sent    []*redis.StringCmd // their replies
	)
	// An operator's replay wakes through the category's stream: rare, and
	// it needs no owner.
	direct := once.DLQ == ""
	var steps [3]error
	var reindex error
	var wait *redis.Conn // the connection that appends, for WAIT
	defer func() {
		if wait != nil {
			wait.Close()
		}
	}()
	if single, ok := c.(*redis.Client); ok {
		// On one server the three steps go in one MULTI/EXEC round trip:
		// they run in order, and a step refused when queued (NOPERM, or
		// MOVED/CROSSSLOT when the server is a cluster node) aborts them
		// all, so the entry is never written unindexed.
		var cmdable redis.Cmdable = single
		if once.Replicas > 0 {
			wait = single.Conn()
			cmdable = wait
		}
		loaded := false
		for {
			pipe := cmdable.TxPipeline()
			idx := index(pipe)
			app := entry(pipe)
			sent = nil
			if direct {
				w.fanout, w.owners = queueFanout(ctx, pipe, category), queueOwners(ctx, pipe, category, key)
				if guess, guessed = guesses.get(category, key); guessed {
					if guess.everyone {
						sent = append(sent, guess.toAll(ctx, pipe, signalMaxLen))
					}
					for _, o := range guess.owners {
						sent = append(sent, guess.toOwner(ctx, pipe, o, signalMaxLen))
					}
				}
			}
			_, err := pipe.Exec(ctx)
			if direct && (refusedReads(err, map[string]*redis.IntCmd{category: w.fanout}, []wakeup{w}) || refusedSignals(err, sent)) {
				// The transaction ran nothing: publish again, waking every
				// instance.
				direct, guessed, w.fanout, w.owners = false, false, nil, nil
				continue
			}
			if IsNoScript(app.Err()) && !loaded {
				// The server lost its script cache (a restart, SCRIPT
				// FLUSH): the append did nothing; what else ran is
				// idempotent. Load the script and send it all again.
				loaded = true
				if err := scriptAppendOnce.Load(ctx, single).Err(); err != nil {
					return fmt.Errorf("append the entry: load the append script: %w", err)
				}
				continue
			}
			steps[0], steps[1] = idx.Err(), app.Err()
			if err != nil && !errors.Is(err, redis.Nil) && steps[0] == nil && steps[1] == nil {
				// The transaction as a whole failed (a guessed owner's stream
				// that is gone answers nil: missed sees to it).
				steps[0] = err
			}
			w.fresh = idx.Val() == 1
			break
		}
	} else {
		// A cluster routes each step to its own node: one after the other,
		// each only once the previous one succeeded.
		idx := index(c)
		if steps[0] = idx.Err(); steps[0] == nil {
			w.fresh = idx.Val() == 1
			var appender redis.Cmdable = c
			if cc, ok := c.(*redis.ClusterClient); ok && once.Replicas > 0 {
				node, err := cc.MasterForKey(ctx, stream)
				if err != nil {
					return fmt.Errorf("append the entry: find the partition's node: %w", err)
				}
				wait = node.Conn()
				appender = wait
			}
			if steps[1] = entry(appender).Err(); steps[1] == nil {
				// The reads that choose whom to wake go after the append.
				var again *redis.IntCmd
				c.Pipelined(ctx, func(p redis.Pipeliner) error {
					again = index(p)
					if direct {
						w.fanout, w.owners = queueFanout(ctx, p, category), queueOwners(ctx, p, category, key)
					}
					return nil
				})
				reindex = again.Err()
				w.fresh = w.fresh || again.Val() == 1 // a reaper took the key out meanwhile
			}
		}
	}
	if steps[0] == nil && steps[1] == nil {
		t := w.target()
		if !guessed {
			steps[2] = signal(ctx, c, []target{t}, signalMaxLen)
		} else if rest, ok := missed(t, guess, sent); ok {
			steps[2] = signal(ctx, c, []target{rest}, signalMaxLen)
		}
		if direct {
			// A new key's "everyone" holds for this publish alone: the
			// next one guesses nothing rather than wake every instance.
			guesses.put(t, !w.fresh)
		}
	}
	switch {
	case steps[0] != nil:
		return fmt.Errorf("index the partition: %w", steps[0])
	case steps[1] != nil && strings.HasPrefix(steps[1].Error(), "NODLQENTRY"):
		return fmt.Errorf("append the entry: %w", ErrDLQEntryMissing)
	case steps[1] != nil:
		return fmt.Errorf("append the entry: %w", steps[1])
	case reindex != nil:
		// Not ErrUnsignalled: a reap may have taken the key out of the
		// index, so the entry may stay unseen until the key is published
		// to again. The caller's retry does that (a duplicate, at least
		// once).
		return fmt.Errorf("%w, but indexing the partition again after it failed (publish again: the entry may not be discovered): %w", ErrAppended, reindex)
	}
	if wait != nil {
		n, err := wait.Wait(ctx, once.Replicas, once.ReplicaTimeout).Result()
		if err != nil {
			return fmt.Errorf("%w: WAIT %d: %w", ErrNotReplicated, once.Replicas, err)
		}
		if n < int64(once.Replicas) {
			return fmt.Errorf("%w: %d of %d replicas acknowledged it within %v", ErrNotReplicated, n, once.Replicas, once.ReplicaTimeout)
		}
	}
	if steps[2] != nil {
		return fmt.Errorf("%w: %w", ErrUnsignalled, steps[2])
	}
	return nil
}

// Once makes a publish idempotent per partition, and optionally durable.
// The zero value appends always and waits for nothing.
type Once struct {
	// ID is the message id and Window how long it is remembered (no
	// deduplication when Window is 0), in whole milliseconds rounded up
	// (see windowMillis).
	ID     string
	Window time.Duration
	// Replicas, when above 0, makes Publish WAIT after appending, on the
	// connection that appended, for that many replicas of the partition's
	// server to acknowledge the write, at most ReplicaTimeout (0: wait
	// forever, as WAIT does).
	Replicas       int
	ReplicaTimeout time.Duration
	// DLQ and DLQID, when set, make the append a move from a dead-letter
	// stream (an operator's replay): in one script on the partition's
	// slot the entry DLQID of DLQ is deleted as the message is appended,
	// and nothing is appended when it is gone (ErrDLQEntryMissing), so a
	// replay publishes at most once. No message-id dedup then.
	DLQ, DLQID string
	// DLQOp is the replay's op (NewOp; Publish makes one when it is ""):
	// a replay Redis ran twice finds its own op with the move and returns
	// nil rather than ErrDLQEntryMissing. A caller that sends the replay
	// again after a lost reply (a MULTI/EXEC, which go-redis does not
	// resend) keeps the op.
	DLQOp string
}

// windowMillis is a dedup window (above 0) in milliseconds for SET ... PX,
// rounded up: truncated, a window under 1 ms would be PX 0, which Redis
// refuses (append_once.lua refuses it before appending).
func windowMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return max(1, ms)
}

// ErrDLQEntryMissing means a replay found its dead-letter entry gone
// (replayed or dropped meanwhile): nothing was appended.
var ErrDLQEntryMissing = errors.New("the dead-letter entry is gone (replayed or dropped meanwhile); nothing was appended")

// ErrAppended matches a Publish error returned after the entry was
// appended, when a later step failed (the index written again, the
// wake-up signal: ErrUnsignalled matches it too).
var ErrAppended = errors.New("the entry was appended")

// ErrNotReplicated means the entry was appended, but fewer replicas than
// asked acknowledged it in time: it may be lost if the server fails over
// now.
var ErrNotReplicated = errors.New("the entry is stored, but not yet on the replicas asked for")

// ErrUnsignalled means a publish stored its entry but could not signal
// idle consumers: they find the entry at their next periodic re-check.
var ErrUnsignalled = fmt.Errorf("%w, but waking idle consumers failed; they find it at their next re-check", ErrAppended)

// PublishPlain appends one entry to an unpartitioned category's stream;
// with once.Window set, only if once.ID was not appended to it within the
// window (append_once.lua, its dedup key in the stream's slot).
func PublishPlain(ctx context.Context, c redis.UniversalClient, category string, fields []any, once Once) error {
	if once.Window <= 0 {
		return c.XAdd(ctx, &redis.XAddArgs{Stream: category, Values: fields}).Err()
	}
	args := append([]any{windowMillis(once.Window)}, fields...)
	return scriptAppendOnce.Run(ctx, c, []string{category, PlainDedupKey(category, once.ID)}, args...).Err()
}

// Partitions returns the keys of a partitioned category: those in its
// index and those the reaper is removing (ReapingKey), which may still
// hold entries until it has checked.
func Partitions(ctx context.Context, c redis.UniversalClient, category string) ([]string, error) {
	return c.SUnion(ctx, IndexKey(category), ReapingKey(category)).Result()
}
