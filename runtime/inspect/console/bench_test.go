package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// BenchmarkConsole measures the console's pages on a handler of 100,000
// partitions (each with its group, one entry not delivered, every other
// one leased): the view by key reads its page live; the sorted views and
// the overview read every partition once per sampling interval (fresh)
// and share that read until then (shared).
func BenchmarkConsole(b *testing.B) {
	const n = 100_000
	srv := redistest.New(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	rdb.RegisterGroup(ctx, c, "shop", "orders", false)
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := lo; i < lo+batch; i++ {
				key := fmt.Sprintf("client-%06d", i)
				s := rdb.PartitionStream("shop", key)
				p.XAdd(ctx, &redis.XAddArgs{Stream: s, Values: []any{"type", "placed", "payload", "{}"}})
				p.XGroupCreate(ctx, s, "orders", "0")
				p.SAdd(ctx, rdb.IndexKey("shop"), key)
				if i%2 == 0 {
					p.Set(ctx, rdb.LeaseKey(s, "orders"), "w1~1:1", time.Hour)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	con, err := New(inspect.New(c), Options{SampleInterval: time.Hour, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(con.Close)
	h := httptest.NewServer(con)
	b.Cleanup(h.Close)
	get := func(b *testing.B, path string) {
		res, err := http.Get(h.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, res.StatusCode)
		}
	}
	// What the console holds per partition of a shared read.
	b.Run("shared-read-size", func(b *testing.B) {
		for b.Loop() {
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			rows, err := inspect.New(c).Partitions(ctx, "orders")
			if err != nil {
				b.Fatal(err)
			}
			goruntime.GC()
			goruntime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(rows)), "bytes/partition")
			goruntime.KeepAlive(rows)
		}
	})
	for _, bc := range []struct {
		name, path string
		fresh      bool
	}{
		{"handler-by-key", "/handler?name=orders&page=500", false},
		{"handler-search", "/handler?name=orders&q=client-0999", false},
		{"handler-sorted-shared", "/handler?name=orders&sort=lag&page=500", false},
		{"overview-shared", "/", false},
		{"handler-sorted-fresh", "/handler?name=orders&sort=lag&page=500", true},
		{"overview-fresh", "/", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			get(b, bc.path) // a shared read exists before the shared views
			b.ResetTimer()
			for b.Loop() {
				if bc.fresh {
					con.snaps.keep(nil) // forget the shared reads: the next view reads
				}
				get(b, bc.path)
			}
		})
	}
}
