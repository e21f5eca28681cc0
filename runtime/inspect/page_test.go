package inspect

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The age of a partition's head is the age of its oldest entry the
// handler has not acked, wherever that entry is: not read by a group
// that does not exist yet, pending, or behind the group's cursor; the
// older of the stream's and the backfill lane's.
func TestHeadAge(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	in := New(c)
	rdb.RegisterGroup(ctx, c, "shop", "h", false)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// add appends an entry to stream whose id is hours before now.
	add := func(stream string, hours int) {
		t.Helper()
		id := fmt.Sprintf("%d-0", now.Add(-time.Duration(hours)*time.Hour).UnixMilli())
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: id, Values: []any{"k", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	index := func(key string) string {
		c.SAdd(ctx, rdb.IndexKey("shop"), key)
		return rdb.PartitionStream("shop", key)
	}
	read := func(stream string, n int64) {
		t.Helper()
		if _, err := rdb.CreateGroup(ctx, c, stream, "h", false); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			if _, err := rdb.ReadGroup(ctx, c, stream, "h", "w1:1", ">", n, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	ack := func(stream string, n int64) {
		t.Helper()
		msgs, err := c.XRangeN(ctx, stream, "-", "+", n).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			c.XAck(ctx, stream, "h", m.ID)
		}
	}
	s := index("nogroup") // no group yet: the first entry
	add(s, 3)
	add(s, 2)
	s = index("pending") // read and not acked: the first pending entry
	add(s, 5)
	add(s, 4)
	read(s, 2)
	s = index("cursor") // the first acked, the second not read: the one behind the cursor
	add(s, 3)
	add(s, 2)
	read(s, 1)
	ack(s, 1)
	s = index("done") // everything acked: nothing waits
	add(s, 1)
	read(s, 1)
	ack(s, 1)
	s = index("lanes") // the backfill lane's head is older
	add(s, 1)
	add(rdb.BackfillStream("shop", "lanes", rdb.DefaultBackfillSuffix), 6)
	s = index("holes") // an entry deleted from the middle: Redis cannot tell the lag
	add(s, 9)
	add(s, 8)
	add(s, 7)
	read(s, 1)
	ack(s, 1)
	if msgs, _ := c.XRange(ctx, s, "-", "+").Result(); len(msgs) != 3 || c.XDel(ctx, s, msgs[1].ID).Val() != 1 {
		t.Fatal("delete the middle entry of holes")
	}
	s = index("gone") // the pending entry was deleted: its id still says its age
	add(s, 4)
	add(s, 3)
	read(s, 1)
	if msgs, _ := c.XRangeN(ctx, s, "-", "+", 1).Result(); len(msgs) != 1 || c.XDel(ctx, s, msgs[0].ID).Val() != 1 {
		t.Fatal("delete the pending entry of gone")
	}

	got, err := in.Partitions(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"nogroup": 3 * time.Hour, "pending": 5 * time.Hour, "cursor": 2 * time.Hour, "done": -1,
		"lanes": 6 * time.Hour, "holes": 7 * time.Hour, "gone": 4 * time.Hour}
	for _, p := range got {
		w, ok := want[p.Key]
		if !ok {
			t.Errorf("an unexpected partition %q", p.Key)
			continue
		}
		delete(want, p.Key)
		// Redis's clock moved on since now was read: the age is at
		// least the entry's offset, and short of the test's timeout more.
		if w < 0 && p.HeadAge != -1 || w >= 0 && (p.HeadAge < w || p.HeadAge > w+time.Minute) {
			t.Errorf("%s: head age %v, want %v", p.Key, p.HeadAge, w)
		}
	}
	for k := range want {
		t.Errorf("partition %q missing", k)
	}
}

// A page of partitions is the slice of the partitions, by category and
// key, whose key contains the search, with their total; describing the
// page reads the same as Partitions does.
func TestPartitionPage(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		in := New(c)
		rdb.RegisterGroup(ctx, c, "shop", "h", false)
		rdb.RegisterGroup(ctx, c, "note", "h", false)
		var keys []string
		for i := range 25 {
			k := fmt.Sprintf("k%02d", i)
			keys = append(keys, k)
			publish(t, c, "shop", k, 1+i%3)
			if i%2 == 0 { // pending and undelivered entries, on every slot the keys fall in
				s := rdb.PartitionStream("shop", k)
				if _, err := rdb.CreateGroup(ctx, c, s, "h", false); err != nil {
					t.Fatal(err)
				}
				if _, err := rdb.ReadGroup(ctx, c, s, "h", "w1:1", ">", 1, -1); err != nil {
					t.Fatal(err)
				}
			}
		}
		c.XAdd(ctx, &redis.XAddArgs{Stream: "note", Values: []any{"k", "v"}}) // unpartitioned: not a row
		all, err := in.Partitions(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		byKey := map[string]PartitionInfo{}
		for _, p := range all {
			byKey[p.Key] = p
		}
		for _, tc := range []struct {
			name  string
			q     PageQuery
			keys  []string
			total int
		}{
			{"first page", PageQuery{Limit: 10}, keys[:10], 25},
			{"last page", PageQuery{Offset: 20, Limit: 10}, keys[20:], 25},
			{"past the end", PageQuery{Offset: 40, Limit: 10}, nil, 25},
			{"negative offset", PageQuery{Offset: -3, Limit: 2}, keys[:2], 25},
			{"default limit", PageQuery{}, keys, 25},
			{"search", PageQuery{Search: "k1", Limit: 5}, keys[10:15], 10},
			{"search, second page", PageQuery{Search: "k1", Offset: 5, Limit: 5}, keys[15:20], 10},
			{"no match", PageQuery{Search: "<x>"}, nil, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				pg, err := in.PartitionPage(ctx, "h", tc.q)
				if err != nil {
					t.Fatal(err)
				}
				if pg.Total != tc.total || len(pg.Partitions) != len(tc.keys) {
					t.Fatalf("total %d, %d rows; want %d, %d", pg.Total, len(pg.Partitions), tc.total, len(tc.keys))
				}
				for j, p := range pg.Partitions {
					w := byKey[p.Key]
					if p.HeadAge < 0 || p.HeadAge > time.Minute {
						t.Errorf("%s: head age %v", p.Key, p.HeadAge)
					}
					p.Idle, p.HeadAge, w.Idle, w.HeadAge = 0, 0, 0, 0 // the clock moved on
					if p.Key != tc.keys[j] || p != w {
						t.Errorf("row %d: %+v, want %+v", j, p, w)
					}
				}
			})
		}
		if _, err := in.PartitionPage(ctx, "hh", PageQuery{}); !errors.Is(err, ErrUnknownHandler) {
			t.Fatalf("a page of an unknown handler: %v", err)
		}
	})
}
