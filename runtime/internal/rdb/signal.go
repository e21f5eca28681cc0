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

// Signal is one wake-up: a publish to the partition Key of the category
// whose signal stream is Stream, at signal id ID.
type Signal struct {
	Stream, ID, Key string
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
			out = append(out, Signal{Stream: s.Stream, ID: m.ID, Key: k})
		}
	}
	return out, nil
}
