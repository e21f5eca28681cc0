package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// KnownHandlers returns every handler an engine registered with this
// Redis (the groups registry of each category, {category}:__groups__),
// with the categories it reads, sorted by name; a handler that only has
// halt records is listed too, without categories. It scans the keyspace
// (on every primary of a cluster): an operator's call, whose cost grows
// with the number of keys (WithHandlerCache keeps its answer).
func (i *Inspector) KnownHandlers(ctx context.Context) ([]HandlerInfo, error) {
	if i.handlers != nil {
		return i.handlers.get(ctx, i, false)
	}
	return i.readHandlers(ctx)
}

// WithHandlerCache returns a copy of i that keeps KnownHandlers' answer
// for up to ttl, for the calls that name a handler (nearly all of them)
// and look it up: a scan of the keyspace each, which takes a few hundred
// milliseconds at 100,000 partitions. A name missing from the kept answer
// is looked up again at once (if the answer is a second old), so a
// handler that registered since is found; a new category of a known
// handler shows within ttl. The copy
// and its own copies share the cache; i does not.
func (i *Inspector) WithHandlerCache(ttl time.Duration) *Inspector {
	j := *i
	j.handlers = &handlerCache{ttl: ttl, minFresh: time.Second}
	return &j
}

// handlerCache is KnownHandlers' answer kept for ttl.
type handlerCache struct {
	ttl      time.Duration
	minFresh time.Duration // the least age at which a lookup of a missing name reads again
	mu       sync.Mutex    // held across a read, so concurrent callers wait for one
	at       time.Time
	hs       []HandlerInfo
}

// get returns the kept answer while younger than ttl, else reads it
// anew; fresh reads it anew once it is minFresh old.
func (c *handlerCache) get(ctx context.Context, i *Inspector, fresh bool) ([]HandlerInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.ttl || fresh && time.Since(c.at) >= c.minFresh {
		at := time.Now()
		hs, err := i.readHandlers(ctx)
		if err != nil {
			return nil, err
		}
		c.at, c.hs = at, hs
	}
	// A copy: the caller may change what it gets.
	out := make([]HandlerInfo, len(c.hs))
	for j, h := range c.hs {
		out[j] = HandlerInfo{Name: h.Name, Categories: slices.Clone(h.Categories)}
	}
	return out, nil
}

func (i *Inspector) readHandlers(ctx context.Context) ([]HandlerInfo, error) {
	reg, err := rdb.Registry(ctx, i.c)
	if err != nil {
		return nil, err
	}
	halted, err := rdb.HaltedHandlers(ctx, i.c)
	if err != nil {
		return nil, err
	}
	cats := map[string][]string{}
	for cat, groups := range reg {
		for _, g := range groups {
			cats[g] = append(cats[g], cat)
		}
	}
	for _, h := range halted {
		if _, ok := cats[h]; !ok {
			cats[h] = nil
		}
	}
	out := make([]HandlerInfo, 0, len(cats))
	for name, cs := range cats {
		sort.Strings(cs)
		out = append(out, HandlerInfo{Name: name, Categories: append([]string{}, cs...)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// Handler returns the handler named name, or an error matching
// ErrUnknownHandler that suggests the nearest known name and lists them.
func (i *Inspector) Handler(ctx context.Context, name string) (HandlerInfo, error) {
	hs, err := i.KnownHandlers(ctx)
	if err != nil {
		return HandlerInfo{}, err
	}
	if i.handlers != nil && !slices.ContainsFunc(hs, func(h HandlerInfo) bool { return h.Name == name }) {
		// Not in the kept answer: it may have registered since. (At
		// most one such read a second: typos do not each scan.)
		if hs, err = i.handlers.get(ctx, i, true); err != nil {
			return HandlerInfo{}, err
		}
	}
	names := make([]string, len(hs))
	for j, h := range hs {
		if h.Name == name {
			return h, nil
		}
		names[j] = h.Name
	}
	if len(names) == 0 {
		return HandlerInfo{}, fmt.Errorf("%w %q: no handler has registered with this Redis (is it the engines' Redis, and has an engine started?)", ErrUnknownHandler, name)
	}
	return HandlerInfo{}, fmt.Errorf("%w %q%s; known handlers: %s", ErrUnknownHandler, name, DidYouMean(name, names), listSome(names, 10))
}

// CheckPartition reports whether partition names a partition of handler
// the way Inspect, Skip and MoveToDLQ take it: a halted partition (its
// record's partition, or the stream holding its head), or a partition
// stream category:{key} of a category the handler reads whose key is in
// the category's index. Otherwise it returns an error matching
// ErrNoPartition that suggests the nearest partition stream (or
// ErrUnknownHandler).
func (i *Inspector) CheckPartition(ctx context.Context, handler, partition string) error {
	h, err := i.Handler(ctx, handler)
	if err != nil {
		return err
	}
	_, _, err = i.findHalt(ctx, handler, partition)
	if !errors.Is(err, ErrNotHalted) {
		return err // found (nil), or failed
	}
	if cat, key, ok := rdb.ParsePartitionStream(partition); ok && slices.Contains(h.Categories, cat) {
		found, err := rdb.IsPartition(ctx, i.c, cat, key)
		if err != nil || found {
			return err
		}
	}
	var candidates []string
	for _, cat := range h.Categories {
		keys, err := rdb.Partitions(ctx, i.c, cat)
		if err != nil {
			return err
		}
		for _, k := range keys {
			candidates = append(candidates, rdb.PartitionStream(cat, k))
		}
	}
	halts, err := rdb.Halts(ctx, i.c, handler, !i.readOnly)
	if err != nil {
		return err
	}
	for _, r := range halts {
		candidates = append(candidates, r.Partition, r.Stream)
	}
	sort.Strings(candidates)
	return fmt.Errorf("%w %q of handler %s%s: a partition is a stream category:{key} of a category it reads (%s), or, while halted, a pm's correlation value or the stream holding the head",
		ErrNoPartition, partition, handler, DidYouMean(partition, candidates), listSome(h.Categories, 10))
}
