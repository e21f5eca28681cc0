package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CreateGroup creates group on stream from id 0 (with MKSTREAM when mk).
// It reports whether the group exists now; without mk, a stream that does
// not exist yet is (false, nil): the group is created when it does.
func CreateGroup(ctx context.Context, c redis.UniversalClient, stream, group string, mk bool) (bool, error) {
	var err error
	if mk {
		err = c.XGroupCreateMkStream(ctx, stream, group, "0").Err()
	} else {
		err = c.XGroupCreate(ctx, stream, group, "0").Err()
	}
	if err == nil || strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return true, nil
	}
	if !mk && strings.Contains(err.Error(), "requires the key to exist") {
		return false, nil
	}
	return false, fmt.Errorf("create group %s on %s: %w", group, stream, err)
}

// ReadGroup reads up to count entries of stream for consumer in group:
// new ones with id ">", the consumer's own pending ones with id "0". block
// < 0 returns at once; 0 blocks without limit; otherwise it waits up to
// block for new entries. No entries (or a block that timed out) is (nil,
// nil).
func ReadGroup(ctx context.Context, c redis.UniversalClient, stream, group, consumer, id string, count int64, block time.Duration) ([]Entry, error) {
	res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer,
		Streams: []string{stream, id}, Count: count, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, s := range res {
		out = append(out, entries(s.Stream, s.Messages)...)
	}
	return out, nil
}

// Consumer is one consumer of a group.
type Consumer struct {
	Name    string
	Pending int64
}

// Consumers lists group's consumers on stream.
func Consumers(ctx context.Context, c redis.UniversalClient, stream, group string) ([]Consumer, error) {
	cs, err := c.XInfoConsumers(ctx, stream, group).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Consumer, len(cs))
	for i, x := range cs {
		out[i] = Consumer{Name: x.Name, Pending: x.Pending}
	}
	return out, nil
}

// PendingIDs lists up to count ids pending on consumer in group, idle at
// least minIdle, from start ("-", or "(" + an id to page after it).
func PendingIDs(ctx context.Context, c redis.UniversalClient, stream, group, consumer string, minIdle time.Duration, start string, count int64) ([]string, error) {
	ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group,
		Idle: minIdle, Start: start, End: "+", Count: count, Consumer: consumer}).Result()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids, nil
}

// Claim moves ids to consumer if they are still idle at least minIdle (so
// a consumer that came back and read one keeps it), returning the entries
// moved.
func Claim(ctx context.Context, c redis.UniversalClient, stream, group, consumer string, minIdle time.Duration, ids []string) ([]Entry, error) {
	msgs, err := c.XClaim(ctx, &redis.XClaimArgs{Stream: stream, Group: group, Consumer: consumer,
		MinIdle: minIdle, Messages: ids}).Result()
	if err != nil {
		return nil, err
	}
	return entries(stream, msgs), nil
}

// Ack acknowledges id in group, unfenced: for unkeyed handlers, which
// hold no lease.
func Ack(ctx context.Context, c redis.UniversalClient, stream, group, id string) error {
	return c.XAck(ctx, stream, group, id).Err()
}

// entries converts go-redis messages of stream.
func entries(stream string, msgs []redis.XMessage) []Entry {
	out := make([]Entry, len(msgs))
	for i, m := range msgs {
		out[i] = Entry{Stream: stream, ID: m.ID}
		if m.Values != nil {
			out[i].Fields = make(map[string]string, len(m.Values))
			for k, v := range m.Values {
				s, _ := v.(string)
				out[i].Fields[k] = s
			}
		}
	}
	return out
}
