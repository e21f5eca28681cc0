package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// LastSignal returns the id of category's newest wake-up signal, "0-0"
// when there is none: the position to follow the signals from.
func LastSignal(ctx context.Context, c redis.UniversalClient, category string) (string, error) {
	xs, err := c.XRevRangeN(ctx, SignalKey(category), "+", "-", 1).Result()
	if err != nil {
		return "", err
	}
	if len(xs) == 1 {
		return xs[0].ID, nil
	}
	return "0-0", nil
}

// SignalsLost reports whether signals after cursor may have been trimmed
// from the signal stream sig: its oldest signal is newer than cursor.
// Trimming removes the oldest signals first, so a reader that read from
// cursor and checks this right after lost none if it reports false; true
// means some may be gone (or none were there), never that one was read.
func SignalsLost(ctx context.Context, c redis.UniversalClient, sig, cursor string) (bool, error) {
	xs, err := c.XRangeN(ctx, sig, "-", "+", 1).Result()
	if err != nil {
		return false, fmt.Errorf("read the oldest signal of %s: %w", sig, err)
	}
	return len(xs) == 1 && idLess(cursor, xs[0].ID), nil
}

// idLess compares two stream ids; a malformed part counts as 0.
func idLess(a, b string) bool {
	ams, aseq := splitID(a)
	bms, bseq := splitID(b)
	if ams != bms {
		return ams < bms
	}
	return aseq < bseq
}

func splitID(id string) (ms, seq uint64) {
	m, s, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(s, 10, 64)
	return ms, seq
}

// SignalBatch is the most signals ReadSignals returns per stream: a batch
// that full means the reader may be behind.
const SignalBatch = 1000

// Signal is one wake-up: a publish to the partition Key, read from the
// signal stream Stream at signal id ID. Category is the partition's
// category when the stream says it (an owner's stream, OwnerSignalKey);
// a category's stream (SignalKey) leaves it empty.
type Signal struct {
	Stream, ID, Key, Category string
}

// ReadSignals waits up to block for signals after the given positions
// (cursors maps a signal stream, SignalKey, to the last id seen) and
// returns up to SignalBatch per stream, in order. A wait that timed out is
// (nil, nil).
func ReadSignals(ctx context.Context, c redis.UniversalClient, cursors map[string]string, block time.Duration) ([]Signal, error) {
	streams := make([]string, 0, 2*len(cursors))
	for s := range cursors {
		streams = append(streams, s)
	}
	for _, s := range streams[:len(cursors)] {
		streams = append(streams, cursors[s])
	}
	res, err := c.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: SignalBatch, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Signal
	for _, s := range res {
		for _, m := range s.Messages {
			k, _ := m.Values["k"].(string)
			cat, _ := m.Values["c"].(string)
			out = append(out, Signal{Stream: s.Stream, ID: m.ID, Key: k, Category: cat})
		}
	}
	return out, nil
}

// KeepOwnerSignals renews the TTL of incarnation's signal stream
// (OwnerSignalKey, OwnerSignalTTL), creating it when it is missing
// (publishers never create it) with one empty signal, and reports whether
// it had to: a stream lost with signals in it (a Redis restart, a stall
// past its TTL) may have held some for this instance.
func KeepOwnerSignals(ctx context.Context, c redis.UniversalClient, incarnation string, maxLen int64) (created bool, err error) {
	s := OwnerSignalKey(incarnation)
	ok, err := c.PExpire(ctx, s, OwnerSignalTTL).Result()
	if err != nil || ok {
		return false, wrapKeep(s, err)
	}
	_, err = c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: s, MaxLen: maxLen, Approx: true, Values: []any{"c", "", "k", ""}})
		pipe.PExpire(ctx, s, OwnerSignalTTL)
		return nil
	})
	return true, wrapKeep(s, err)
}

func wrapKeep(stream string, err error) error {
	if err != nil {
		return fmt.Errorf("keep the signal stream %s: %w", stream, err)
	}
	return nil
}

// KeepFanout sets the fanout marker (FanoutKey) of each category for ttl,
// to epoch if it is missing, and returns each marker's value. Give each
// call its own epoch: a value that changed since the last call says the
// marker lapsed or was lost meanwhile (another instance, or this one, set
// it again), and publishes may have skipped the category's stream then.
func KeepFanout(ctx context.Context, c redis.UniversalClient, categories []string, epoch string, ttl time.Duration) ([]string, error) {
	gets := make([]*redis.StringCmd, len(categories))
	c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, cat := range categories {
			pipe.SetNX(ctx, FanoutKey(cat), epoch, ttl)
			pipe.PExpire(ctx, FanoutKey(cat), ttl)
			gets[i] = pipe.Get(ctx, FanoutKey(cat))
		}
		return nil
	})
	out := make([]string, len(categories))
	for i, cmd := range gets {
		v, err := cmd.Result()
		if err != nil {
			return nil, fmt.Errorf("keep %s, the mark that every instance reads %s: %w", FanoutKey(categories[i]), categories[i], err)
		}
		out[i] = v
	}
	return out, nil
}

// DropOwnerSignals deletes incarnation's signal stream, as its engine
// stops.
func DropOwnerSignals(ctx context.Context, c redis.UniversalClient, incarnation string) error {
	return c.Del(ctx, OwnerSignalKey(incarnation)).Err()
}
