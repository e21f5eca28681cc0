package runtime

import (
	"context"
	"fmt"
	"sort"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// checkMemoryPolicy refuses to start (or warns, with AllowEviction) when a
// server may evict keys. A server that does not let the engine read its
// configuration (managed services often refuse CONFIG) is logged as
// unchecked, not refused. SkipEvictionCheck skips it all: an embedded
// Redis has no CONFIG, and its warning would only be noise.
func (e *Engine) checkMemoryPolicy(ctx context.Context) error {
	if e.o.SkipEvictionCheck {
		return nil
	}
	policies, err := rdb.MemoryPolicies(ctx, e.c)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		e.log.Warn("seqby: could not check Redis's maxmemory-policy; make sure it is noeviction, or Redis may evict seqby's leases and streams",
			"err", err)
	}
	var bad []string
	for addr, p := range policies {
		if p != "noeviction" {
			bad = append(bad, fmt.Sprintf("%s has %s", addr, p))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	if e.o.AllowEviction {
		e.log.Warn("seqby: Redis may evict seqby's keys (Options.AllowEviction is set); use maxmemory-policy noeviction", "servers", bad)
		return nil
	}
	return fmt.Errorf("seqby engine: %v: %w", bad, ErrEvictionPolicy)
}
