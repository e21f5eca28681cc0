package rdb

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The read-only views an operator needs; never on the consumer's path.

// LeaseHolder returns the token holding the lease at key and its
// remaining TTL; "" and 0 when the lease is free.
func LeaseHolder(ctx context.Context, c redis.UniversalClient, key string) (token string, ttl time.Duration, err error) {
	token, err = c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	ttl, _ = c.PTTL(ctx, key).Result()
	return token, ttl, nil
}

// PendingEntry is one entry of a group's pending list.
type PendingEntry struct {
	ID         string
	Consumer   string
	Idle       time.Duration
	Deliveries int64
}

// Lane is a stream as a consumer group sees it.
type Lane struct {
	Exists  bool
	Length  int64
	Pending []PendingEntry // oldest first, at most the count asked for
}

// LaneOf describes stream for handler: whether it exists, its length and
// up to count of the pending entries of handler's group there (LaneGroup;
// none when the group does not exist yet).
func LaneOf(ctx context.Context, c redis.UniversalClient, stream, handler string, count int64) (Lane, error) {
	var l Lane
	n, err := c.Exists(ctx, stream).Result()
	if err != nil || n == 0 {
		return l, err
	}
	l.Exists = true
	if l.Length, err = c.XLen(ctx, stream).Result(); err != nil {
		return l, err
	}
	group, err := LaneGroup(ctx, c, stream, handler)
	if err != nil {
		return l, err
	}
	ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: count}).Result()
	if IsNoGroup(err) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	for _, p := range ps {
		l.Pending = append(l.Pending, PendingEntry{ID: p.ID, Consumer: p.Consumer, Idle: p.Idle, Deliveries: p.RetryCount})
	}
	return l, nil
}

// EntryAt reads entry id of stream. An entry deleted from the stream has
// nil Fields.
func EntryAt(ctx context.Context, c redis.UniversalClient, stream, id string) (Entry, error) {
	msgs, err := c.XRangeN(ctx, stream, id, id, 1).Result()
	if err != nil {
		return Entry{}, err
	}
	if len(msgs) == 0 {
		return Entry{Stream: stream, ID: id}, nil
	}
	return entries(stream, msgs)[0], nil
}
