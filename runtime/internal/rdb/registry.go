package rdb

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The operator's views of the whole keyspace: they SCAN (on every primary
// of a cluster), so they are operator calls, never on the consumer's path.

// scanKeys returns the keys matching pattern (of Redis type typ when it
// is not ""), sorted, from every primary of a cluster.
func scanKeys(ctx context.Context, c redis.UniversalClient, pattern, typ string) ([]string, error) {
	var mu sync.Mutex // a cluster scans its masters concurrently
	seen := map[string]bool{}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var it *redis.ScanIterator
		if typ != "" {
			it = c.ScanType(ctx, 0, pattern, 1000, typ).Iterator()
		} else {
			it = c.Scan(ctx, 0, pattern, 1000).Iterator()
		}
		for it.Next(ctx) {
			mu.Lock()
			seen[it.Val()] = true
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// Registry returns every category with a groups registry (GroupsKey) and
// the groups (handlers) registered for it, each list sorted. Every engine
// registers each of its registrations' groups with each category it
// reads at start, so this is the set of handlers that ever ran.
func Registry(ctx context.Context, c redis.UniversalClient) (map[string][]string, error) {
	keys, err := scanKeys(ctx, c, GroupsKey("*"), "hash")
	if err != nil {
		return nil, fmt.Errorf("find the handler registries: %w", err)
	}
	out := make(map[string][]string, len(keys))
	for _, k := range keys {
		// GroupsKey("") is "{}:__groups__": the category goes between
		// its first byte and the rest.
		cat, ok := strings.CutSuffix(strings.TrimPrefix(k, "{"), GroupsKey("")[1:])
		if !ok || GroupsKey(cat) != k || strings.ContainsAny(cat, "{}") {
			continue // a key that only looks like a registry: "{a}b}:__groups__"
		}
		groups, err := Groups(ctx, c, cat)
		if err != nil {
			return nil, err
		}
		sort.Strings(groups)
		out[cat] = groups
	}
	return out, nil
}

// DLQStreams returns every dead-letter stream (DLQStream: category:{key}:dlq),
// sorted.
func DLQStreams(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	keys, err := scanKeys(ctx, c, DLQStream("*", "*"), "stream")
	if err != nil {
		return nil, fmt.Errorf("find the dead-letter streams: %w", err)
	}
	out := keys[:0]
	for _, k := range keys {
		if _, _, ok := ParseDLQStream(k); ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// ParsePartitionStream splits a partition stream "category:{key}" into its
// category and key; ok is false for any other name (a lane, a DLQ, a
// bookkeeping key).
func ParsePartitionStream(stream string) (category, key string, ok bool) {
	i := strings.Index(stream, ":{")
	if i <= 0 || !strings.HasSuffix(stream, "}") {
		return "", "", false
	}
	category, key = stream[:i], stream[i+2:len(stream)-1]
	if key == "" || strings.ContainsAny(key, "{}") || strings.ContainsAny(category, "{}") {
		return "", "", false
	}
	return category, key, true
}

// ParseDLQStream splits a dead-letter stream "category:{key}:dlq" into
// the category and key of its partition; ok is false for any other name.
func ParseDLQStream(stream string) (category, key string, ok bool) {
	p, found := strings.CutSuffix(stream, ":"+DLQSuffix)
	if !found {
		return "", "", false
	}
	return ParsePartitionStream(p)
}
