package rdb

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// MemoryPolicies returns each server's maxmemory-policy (every master of a
// cluster), keyed by address. A server that refuses CONFIG GET (a managed
// service, or a user without +config|get) fails the call with its error.
func MemoryPolicies(ctx context.Context, c redis.UniversalClient) (map[string]string, error) {
	var mu sync.Mutex
	out := map[string]string{}
	get := func(ctx context.Context, c *redis.Client) error {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return fmt.Errorf("CONFIG GET maxmemory-policy on %s: %w", c.Options().Addr, err)
		}
		mu.Lock()
		out[c.Options().Addr] = v["maxmemory-policy"]
		mu.Unlock()
		return nil
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, get)
	case *redis.Client:
		err = get(ctx, c)
	default:
		err = fmt.Errorf("cannot read the memory policy through a %T", c)
	}
	return out, err
}
