package rdb

import (
	"context"
	"errors"
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

// Signal is one wake-up: a publish to the partition Key of the category
// whose signal stream is Stream, at signal id ID.
type Signal struct {
	Stream, ID, Key string
}

// ReadSignals waits up to block for signals after the given positions
// (cursors maps a signal stream, SignalKey, to the last id seen) and
// returns up to 1000 per stream, in order. A wait that timed out is
// (nil, nil).
func ReadSignals(ctx context.Context, c redis.UniversalClient, cursors map[string]string, block time.Duration) ([]Signal, error) {
	streams := make([]string, 0, 2*len(cursors))
	for s := range cursors {
		streams = append(streams, s)
	}
	for _, s := range streams[:len(cursors)] {
		streams = append(streams, cursors[s])
	}
	res, err := c.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1000, Block: block}).Result()
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
