package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// BatchEntry is one entry of PublishBatch: for a partitioned category,
// Key and Stream (the partition's stream or backfill lane); for an
// unpartitioned one, Stream is the category. ID, when set with
// PublishBatch's window, is its message id: an entry whose id was
// appended within the window is not appended again (append_once.lua),
// so a batch run twice stores each entry once.
type BatchEntry struct {
	Category, Key, Stream string
	ID                    string
	Partitioned           bool
	Fields                []any
}

// PublishBatch appends entries with the guarantees of Publish for each,
// in few round trips, keeping the order of the entries of each stream.
// stored[i] tells whether entries[i] was appended; for one stream the
// appended entries are a prefix of its entries. err is the first failure;
// ErrUnsignalled alone means every entry was stored and indexed.
//
// On a single Redis one MULTI/EXEC holds each entry's index step and
// append, then the reads that choose whom to wake; one pipeline
// then wakes each partition's owners, after its entries. On a cluster the
// steps of Publish run for all entries at once: the index for every
// partition (one pipeline), the appends in rounds (the n-th entry of every
// stream in round n, so a stream's entries never race each other across
// retries or redirections), then the index again with the reads, and the
// wake-ups of every partition that got an entry (a pipeline each).
//
// window, when above 0, makes each entry with an ID idempotent, as
// Once.Window does for Publish.
func PublishBatch(ctx context.Context, c redis.UniversalClient, entries []BatchEntry, signalMaxLen int64, window time.Duration) (stored []bool, err error) {
	stored = make([]bool, len(entries))
	type part struct{ category, key string }
	var parts []part // in order of first appearance
	seen := map[part]bool{}
	for _, e := range entries {
		if p := (part{e.Category, e.Key}); e.Partitioned && !seen[p] {
			seen[p] = true
			parts = append(parts, p)
		}
	}
	index := func(pipe redis.Pipeliner, p part) *redis.IntCmd { return pipe.SAdd(ctx, IndexKey(p.category), p.key) }
	appendEntry := func(pipe redis.Pipeliner, e BatchEntry) redis.Cmder {
		if window <= 0 || e.ID == "" {
			return pipe.XAdd(ctx, &redis.XAddArgs{Stream: e.Stream, Values: e.Fields})
		}
		dedup := PlainDedupKey(e.Category, e.ID)
		if e.Partitioned {
			dedup = DedupKey(e.Category, e.Key, e.ID)
		}
		// Inside MULTI, and in a pipeline, a missing script cannot fall
		// back to EVAL: NOSCRIPT says it did nothing, and the batch loads
		// it (loadOnce) and sends again.
		return scriptAppendOnce.EvalSha(ctx, pipe, []string{e.Stream, dedup}, append([]any{windowMillis(window)}, e.Fields...)...)
	}
	// loadOnce loads the append script the first time a NOSCRIPT reply
	// (the server lost its script cache) says it is missing; true: send
	// again.
	loaded := false
	loadOnce := func(cmds []redis.Cmder) (bool, error) {
		if loaded || !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c != nil && IsNoScript(c.Err()) }) {
			return false, nil
		}
		loaded = true
		if err := scriptAppendOnce.Load(ctx, c).Err(); err != nil {
			return false, fmt.Errorf("load the append script: %w", err)
		}
		return true, nil
	}
	fanouts := func(pipe redis.Pipeliner) map[string]*redis.IntCmd {
		m := map[string]*redis.IntCmd{}
		for _, p := range parts {
			if m[p.category] == nil {
				m[p.category] = queueFanout(ctx, pipe, p.category)
			}
		}
		return m
	}

	if single, ok := c.(*redis.Client); ok {
		var (
			adds    []redis.Cmder
			indexes []*redis.IntCmd
			fresh   map[part][]*redis.IntCmd
			ws      []wakeup
			execErr error
		)
		for direct := true; ; direct = false {
			pipe := single.TxPipeline()
			adds, indexes, fresh = make([]redis.Cmder, len(entries)), nil, map[part][]*redis.IntCmd{}
			for i, e := range entries {
				if e.Partitioned {
					p := part{e.Category, e.Key}
					indexes = append(indexes, index(pipe, p))
					fresh[p] = append(fresh[p], indexes[len(indexes)-1])
				}
				adds[i] = appendEntry(pipe, e)
			}
			ws = make([]wakeup, len(parts))
			var fan map[string]*redis.IntCmd
			if direct {
				fan = fanouts(pipe)
			}
			for i, p := range parts {
				ws[i] = wakeup{category: p.category, key: p.key}
				if direct {
					ws[i].fanout, ws[i].owners = fan[p.category], queueOwners(ctx, pipe, p.category, p.key)
				}
			}
			_, execErr = pipe.Exec(ctx)
			if direct && refusedReads(execErr, fan, ws) {
				continue // as in Publish: again, waking every instance
			}
			if again, err := loadOnce(adds); err != nil {
				return stored, err
			} else if again {
				continue // the appends did nothing; the rest is idempotent
			}
			break
		}
		// A command refused while queued aborts them all (EXECABORT); one
		// failing at EXEC time (a key of another type) fails alone.
		for i, cmd := range adds {
			if stored[i] = cmd.Err() == nil; !stored[i] && err == nil {
				err = fmt.Errorf("append to %s: %w", entries[i].Stream, firstErr(cmd.Err(), execErr))
			}
		}
		for _, cmd := range indexes {
			if cmd.Err() != nil && err == nil {
				err = fmt.Errorf("index the partitions (publish again: entries stored may not be discovered): %w", firstErr(cmd.Err(), execErr))
			}
		}
		if err != nil {
			return stored, err
		}
		for i, p := range parts {
			for _, cmd := range fresh[p] {
				ws[i].fresh = ws[i].fresh || cmd.Val() == 1
			}
		}
		if err := signal(ctx, c, targets(ws), signalMaxLen); err != nil {
			return stored, fmt.Errorf("%w: %w", ErrUnsignalled, err)
		}
		return stored, nil
	}

	// A cluster: step 1, the index of every partition.
	var idx []*redis.IntCmd
	c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, p := range parts {
			idx = append(idx, index(pipe, p))
		}
		return nil
	})
	for _, cmd := range idx {
		if cmd.Err() != nil {
			return stored, fmt.Errorf("index the partitions: %w", cmd.Err())
		}
	}
	// Step 2: the appends, round n taking the n-th entry of every stream.
	byStream := map[string][]int{}
	var streams []string
	for i, e := range entries {
		if byStream[e.Stream] == nil {
			streams = append(streams, e.Stream)
		}
		byStream[e.Stream] = append(byStream[e.Stream], i)
	}
	failed := map[string]bool{}
	for round := 0; ; round++ {
		var batch []int
		for _, s := range streams {
			if ix := byStream[s]; round < len(ix) && !failed[s] {
				batch = append(batch, ix[round])
			}
		}
		if len(batch) == 0 {
			break
		}
		cmds := make([]redis.Cmder, len(batch))
		for {
			c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				for j, i := range batch {
					cmds[j] = appendEntry(pipe, entries[i])
				}
				return nil
			})
			if again, err := loadOnce(cmds); err != nil {
				return stored, err
			} else if !again {
				break
			}
		}
		for j, i := range batch {
			if stored[i] = cmds[j].Err() == nil; !stored[i] {
				failed[entries[i].Stream] = true
				if err == nil {
					err = fmt.Errorf("append to %s: %w", entries[i].Stream, cmds[j].Err())
				}
			}
		}
	}
	// Step 3: index again (a reap may have run since step 1) and signal,
	// for every partition that got an entry.
	got := map[part]bool{}
	for i, e := range entries {
		if stored[i] && e.Partitioned {
			got[part{e.Category, e.Key}] = true
		}
	}
	// The index step is idempotent: one failure is sent once more before
	// the batch reports it.
	var reindexErr, signalErr error
	var ws []wakeup
	for try := 0; try < 2; try++ {
		var again []*redis.IntCmd
		c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			var fan map[string]*redis.IntCmd
			if try == 0 {
				fan = fanouts(pipe) // after the appends, as Publish
			}
			for i, p := range parts {
				if got[p] {
					again = append(again, index(pipe, p))
					if try == 0 {
						ws = append(ws, wakeup{category: p.category, key: p.key, fresh: idx[i].Val() == 1,
							fanout: fan[p.category], owners: queueOwners(ctx, pipe, p.category, p.key)})
					}
				}
			}
			return nil
		})
		if try == 0 {
			for i := range ws {
				ws[i].fresh = ws[i].fresh || again[i].Val() == 1 // a reaper took the key out meanwhile
			}
		}
		reindexErr = nil
		for _, cmd := range again {
			if cmd.Err() != nil {
				reindexErr = cmd.Err()
				break
			}
		}
		if reindexErr == nil {
			break
		}
	}
	if len(ws) > 0 {
		signalErr = signal(ctx, c, targets(ws), signalMaxLen)
	}
	if reindexErr != nil {
		reindexErr = fmt.Errorf("index the partitions again after appending (publish again: the entries are stored but may not be discovered): %w", reindexErr)
	}
	if err != nil || reindexErr != nil {
		return stored, errors.Join(err, reindexErr)
	}
	if signalErr != nil {
		return stored, fmt.Errorf("%w: %w", ErrUnsignalled, signalErr)
	}
	return stored, nil
}

// firstErr returns a, or b when a is nil.
func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// refusedReads reports whether a read that chooses whom to wake was
// refused by the ACL when queued (NOPERM: a rule from before
// owner-directed wake-ups, without +hvals), so that the transaction was
// aborted (EXECABORT) and ran nothing. A refusal at EXEC (the ACL changed
// in between) ran the append: it is not sent again.
func refusedReads(execErr error, fan map[string]*redis.IntCmd, ws []wakeup) bool {
	if !hasPrefix(execErr, "EXECABORT") {
		return false
	}
	for _, cmd := range fan {
		if hasPrefix(cmd.Err(), "NOPERM") {
			return true
		}
	}
	for _, w := range ws {
		if w.owners != nil && hasPrefix(w.owners.Err(), "NOPERM") {
			return true
		}
	}
	return false
}

// refusedSignals reports whether a guessed signal was refused by the ACL
// when queued (NOPERM on seqby:__wake__:*), aborting the transaction.
func refusedSignals(execErr error, sent []*redis.StringCmd) bool {
	if !hasPrefix(execErr, "EXECABORT") {
		return false
	}
	for _, cmd := range sent {
		if hasPrefix(cmd.Err(), "NOPERM") {
			return true
		}
	}
	return false
}
