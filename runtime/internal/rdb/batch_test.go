package rdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// Many workers, each on its own partition (its own slot on a cluster),
// read and ack through one Batcher at once: each gets its own partition's
// entries in order, each call fenced by its own lease, and a script cache
// the server lost (SCRIPT FLUSH) halfway costs nothing but a reload.
func TestBatcherSharesRoundTrips(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		const workers, events = 40, 30
		b := NewBatcher(c)
		leases := make([]Lease, workers)
		for w := range workers {
			stream := PartitionStream("order", fmt.Sprint("k", w))
			for i := range events {
				if err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"n", i}}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Acquire(ctx, c, PartitionLease(stream, "h"), "o", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Reclaim(ctx, c, l, "h", []string{stream}); err != nil {
				t.Fatal(err)
			}
			leases[w] = l
		}
		var flushed sync.Once
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lanes := []string{PartitionStream("order", fmt.Sprint("k", w))}
				var ack *Entry
				next := 0
				for {
					es, _, err := b.ReadAhead(ctx, leases[w], "h", lanes, 4, ack)
					if err != nil {
						errs <- err
						return
					}
					if len(es) == 0 {
						break
					}
					for i, e := range es {
						if e.Fields["n"] != fmt.Sprint(next) {
							errs <- fmt.Errorf("worker %d read %v, want n=%d", w, e.Fields, next)
							return
						}
						next++
						if i < len(es)-1 {
							if err := b.Ack(ctx, leases[w], "h", e.Stream, e.ID); err != nil {
								errs <- err
								return
							}
						}
						ack = &es[i]
					}
					if next == events/2 {
						flushed.Do(func() {
							for _, err := range []error{flushScripts(ctx, c)} {
								if err != nil {
									errs <- err
								}
							}
						})
					}
				}
				if ack != nil {
					if err := b.Ack(ctx, leases[w], "h", ack.Stream, ack.ID); err != nil {
						errs <- err
						return
					}
				}
				if next != events {
					errs <- fmt.Errorf("worker %d read %d entries, want %d", w, next, events)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// Each call is fenced by its own lease.
		stale := leases[0]
		stale.Generation--
		if err := b.Ack(ctx, stale, "h", PartitionStream("order", "k0"), "1-0"); !errors.Is(err, ErrFenced) {
			t.Errorf("a stale ack through the Batcher: %v, want ErrFenced", err)
		}
	})
}

// flushScripts empties every server's script cache.
func flushScripts(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return s.ScriptFlush(ctx).Err() })
	}
	return c.ScriptFlush(ctx).Err()
}

// A caller whose context ends stops waiting, even while the pipeline that
// carries its call is stuck behind a server busy in a script.
func TestBatcherCallerContext(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	b := NewBatcher(c)
	l, err := Acquire(ctx, c, PartitionLease("order:{k}", "h"), "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		other := redis.NewClient(&redis.Options{Addr: c.Options().Addr, ReadTimeout: 10 * time.Second})
		defer other.Close()
		other.Eval(context.Background(), "local t = redis.call('TIME'); while true do local n = redis.call('TIME'); if (n[1] - t[1]) * 1000000 + n[2] - t[2] > 2000000 then return 1 end end", nil)
	}()
	probe := redis.NewClient(&redis.Options{Addr: c.Options().Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer probe.Close()
	eventually(t, 10*time.Second, "the server busy in the script", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return probe.Ping(pctx).Err() != nil
	})
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := b.Ack(cctx, l, "h", "order:{k}", "1-0"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ack with an ended context: %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-busy:
		t.Fatal("the server was free again before the call returned: the caller waited for the pipeline, not for its context")
	default:
	}
	<-busy
}
