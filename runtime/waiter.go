package runtime

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waiter wakes idle partitions without polling them: one XREAD BLOCK per
// instance across the categories' signal streams, which the publish script
// appends the key to atomically with the entry. A worker takes mark()
// before its fenced read and, when the read finds nothing, waits for a
// signal counted after that mark: a signal seen before the mark was for an
// entry the read already saw, so no entry is missed.
type waiter struct {
	c       redis.UniversalClient
	block   time.Duration
	mu      sync.Mutex
	cursors map[string]string // signal stream -> last id read
	cats    map[string]string // signal stream -> category
	counts  map[string]uint64 // category \x00 key -> signals seen
	waiting map[string][]chan struct{}
}

func newWaiter(c redis.UniversalClient, block time.Duration) *waiter {
	return &waiter{c: c, block: block, cursors: map[string]string{}, cats: map[string]string{},
		counts: map[string]uint64{}, waiting: map[string][]chan struct{}{}}
}

// watch starts following a category's signals from its newest entry. It
// must run before any worker of the category reads.
func (w *waiter) watch(ctx context.Context, category string) error {
	sig := SignalKey(category)
	w.mu.Lock()
	_, ok := w.cursors[sig]
	w.mu.Unlock()
	if ok {
		return nil
	}
	last := "0-0"
	xs, err := w.c.XRevRangeN(ctx, sig, "+", "-", 1).Result()
	if err != nil {
		return err
	}
	if len(xs) == 1 {
		last = xs[0].ID
	}
	w.mu.Lock()
	w.cursors[sig], w.cats[sig] = last, category
	w.mu.Unlock()
	return nil
}

func (w *waiter) mark(category, key string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[category+"\x00"+key]
}

// wait returns a channel closed by the first signal for the key after seq.
func (w *waiter) wait(category, key string, seq uint64) <-chan struct{} {
	ch := make(chan struct{})
	id := category + "\x00" + key
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts[id] > seq {
		close(ch)
		return ch
	}
	w.waiting[id] = append(w.waiting[id], ch)
	return ch
}

// run reads signals until ctx ends.
func (w *waiter) run(ctx context.Context, onErr func(error)) {
	for ctx.Err() == nil {
		w.mu.Lock()
		streams := make([]string, 0, 2*len(w.cursors))
		for s := range w.cursors {
			streams = append(streams, s)
		}
		for _, s := range streams {
			streams = append(streams, w.cursors[s])
		}
		w.mu.Unlock()
		if len(streams) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(w.block):
			}
			continue
		}
		res, err := w.c.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1000, Block: w.block}).Result()
		if err != nil {
			if errors.Is(err, redis.Nil) || ctx.Err() != nil {
				continue
			}
			onErr(err)
			select {
			case <-ctx.Done():
			case <-time.After(w.block):
			}
			continue
		}
		w.mu.Lock()
		for _, s := range res {
			cat := w.cats[s.Stream]
			for _, m := range s.Messages {
				w.cursors[s.Stream] = m.ID
				k, _ := m.Values["k"].(string)
				id := cat + "\x00" + k
				w.counts[id]++
				for _, ch := range w.waiting[id] {
					close(ch)
				}
				delete(w.waiting, id)
			}
		}
		w.mu.Unlock()
	}
}
