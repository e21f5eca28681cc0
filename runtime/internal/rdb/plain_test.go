package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// plainScene is a partition on a generation group: stream "o:{k}" with
// entries 1-1..n-1 and its lease held by owner "a", on a single Redis or
// (cluster) a Redis Cluster of 3 masters.
type plainScene struct {
	c      redis.UniversalClient
	cl     *redistest.Cluster // nil on a single Redis
	ctx    context.Context
	stream string
	ref    LeaseRef
	lease  Lease
}

func newPlainScene(t *testing.T, n int, cluster bool) *plainScene {
	t.Helper()
	s := &plainScene{ctx: ctxT(t), stream: PartitionStream("o", "k")}
	if cluster {
		s.cl = redistest.NewCluster(t, 3)
		s.c = s.cl.Client(t)
	} else {
		s.c = newRedis(t)
	}
	c, ctx := s.c, s.ctx
	for i := 1; i <= n; i++ {
		c.XAdd(ctx, &redis.XAddArgs{Stream: s.stream, ID: fmt.Sprintf("%d-1", i), Values: []any{"n", i}})
	}
	s.ref = PartitionLease(s.stream, "h")
	l, err := acquireGroups(ctx, c, s.ref, "a", []string{s.stream}, true)
	if err != nil || !l.GenGroups {
		t.Fatalf("acquire: %+v, %v", l, err)
	}
	s.lease = l
	if err := LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	return s
}

// firstRead is the generation's first read (round.lua's) through b: 1-1
// and 2-1, which the owner then holds.
func (s *plainScene) firstRead(t *testing.T, b *Batcher) []Entry {
	t.Helper()
	es, _, err := b.ReadAhead(s.ctx, s.lease, s.lease.ReadGroup(), []string{s.stream}, 2, nil, ReadFlags{})
	if err != nil || len(es) != 2 {
		t.Fatalf("first read: %v, %v", ids(es), err)
	}
	return es
}

// scripts is how many scripts the scene's servers ran so far.
func (s *plainScene) scripts(t *testing.T) int64 {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return scriptCalls(s.ctx, t, s.c.(*redis.Client))
	}
	var n atomic.Int64
	cc.ForEachMaster(s.ctx, func(ctx context.Context, c *redis.Client) error {
		n.Add(scriptCalls(ctx, t, c))
		return nil
	})
	return n.Load()
}

// ids are the ids of es.
func ids(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// A slice on a generation group goes as plain commands when its op
// allows (no script runs) and answers as round.lua would; anything but a
// clean answer goes again as round.lua's, which decides it.
func TestBatcherPlainSlices(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprint("cluster=", cluster), func(t *testing.T) { testPlainSlices(t, cluster) })
	}
}

func testPlainSlices(t *testing.T, cluster bool) {
	s := newPlainScene(t, 8, cluster)
	c, ctx, l := s.c, s.ctx, s.lease
	b := NewBatcher(c)
	g := l.ReadGroup()
	lanes := []string{s.stream}
	scripts := func() int64 { return s.scripts(t) }

	// The generation's first read is round.lua's (its pending pass).
	n0 := scripts()
	es, more, err := b.ReadAhead(ctx, l, g, lanes, 2, nil, ReadFlags{})
	if err != nil || !slices.Equal(ids(es), []string{"1-1", "2-1"}) || !more || es[0].Pending || scripts() != n0+1 {
		t.Fatalf("first read: %v more %v, %v (scripts %d); want 1-1 2-1 through round.lua", ids(es), more, err, scripts()-n0)
	}
	// Settled: plain, acking what it carries.
	n0 = scripts()
	es, more, err = b.ReadAhead(ctx, l, g, lanes, 2, es, ReadFlags{Settled: true})
	if err != nil || !slices.Equal(ids(es), []string{"3-1", "4-1"}) || !more || es[0].Deliveries != 1 || es[1].Stream != s.stream {
		t.Fatalf("settled read: %+v more %v, %v; want 3-1 4-1", es, more, err)
	}
	if err := b.AckEntries(ctx, l, g, es[:1], false); err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(ctx, l); err != nil {
		t.Fatal(err)
	}
	p := b.ReadNew(l, g, lanes, 3, es[1:], nil, true)
	es, more, err = p.Wait(ctx)
	if err != nil || !slices.Equal(ids(es), []string{"5-1", "6-1", "7-1"}) || !more {
		t.Fatalf("settled read-new: %v more %v, %v; want 5-1 6-1 7-1", ids(es), more, err)
	}
	if n := scripts(); n != n0 {
		t.Fatalf("%d scripts ran for plain slices; want none", n-n0)
	}
	if s.cl != nil {
		// The slot moves behind the client's back: the plain commands
		// come back MOVED, and the slice goes again as round.lua's
		// through the cluster client, which follows.
		if _, err := s.cl.MoveSlot(ctx, s.ref.Key, 0); err != nil {
			t.Fatal(err)
		}
		var more bool
		es, more, err = b.ReadAhead(ctx, l, g, lanes, 3, es, ReadFlags{Settled: true})
		if err != nil || len(es) != 1 || es[0].ID != "8-1" || more {
			t.Fatalf("a read after the slot moved: %v more %v, %v; want 8-1", ids(es), more, err)
		}
		testPlainUnclean(t, s, b, es)
		return
	}
	// A read of fewer than asked says nothing more is waiting.
	es, more, err = b.ReadAhead(ctx, l, g, lanes, 4, es, ReadFlags{Settled: true})
	if err != nil || !slices.Equal(ids(es), []string{"8-1"}) || more {
		t.Fatalf("the last read: %v more %v, %v; want 8-1, no more", ids(es), more, err)
	}
	testPlainUnclean(t, s, b, es)
}

// testPlainUnclean: answers that are not clean, each decided by
// round.lua; last is what the owner holds, 8-1, the stream's last entry.
func testPlainUnclean(t *testing.T, s *plainScene, b *Batcher, last []Entry) {
	c, ctx, l := s.c, s.ctx, s.lease
	g, lanes := l.ReadGroup(), []string{s.stream}
	n0 := s.scripts(t)
	// An ack of an id acked already (a resent ack acks fewer): done.
	if err := b.AckEntries(ctx, l, g, []Entry{{Stream: s.stream, ID: "1-1"}}, false); err != nil {
		t.Fatalf("an ack of an acked entry: %v; want done", err)
	}
	// Paused.
	c.HSet(ctx, MetaKey(s.ref.Key), MetaPaused, "{}")
	if err := b.Verify(ctx, l); !errors.Is(err, ErrPaused) {
		t.Fatalf("verify of a paused partition: %v, want ErrPaused", err)
	}
	c.HDel(ctx, MetaKey(s.ref.Key), MetaPaused)
	if n := s.scripts(t); n != n0+2 {
		t.Fatalf("%d scripts decided 2 unclean answers", n-n0)
	}

	// A stale owner: its lease deleted, then taken by b. Its acks and
	// reads do nothing to b's group.
	c.Del(ctx, s.ref.Key)
	if err := b.Verify(ctx, l); !errors.Is(err, ErrFenced) {
		t.Fatalf("verify of a deleted lease: %v, want ErrFenced", err)
	}
	c.XAdd(ctx, &redis.XAddArgs{Stream: s.stream, ID: "9-1", Values: []any{"n", 9}})
	// Before a successor its read fails (fenced), though the group, which
	// only a script ends, still takes its ack of 8-1 (which it ran, and
	// nobody else can have meanwhile) and delivers 9-1 to it, which the
	// successor takes over.
	if _, _, err := b.ReadAhead(ctx, l, g, lanes, 4, last, ReadFlags{Settled: true}); !errors.Is(err, ErrFenced) {
		t.Fatalf("a read under a deleted lease: %v, want ErrFenced", err)
	}
	next, err := acquireGroups(ctx, c, s.ref, "b", lanes, true)
	if err != nil {
		t.Fatal(err)
	}
	before := laneGroups(t, ctx, c, s.stream)
	// 9-1's delivery went back (giveBack): the stale owner never saw it.
	want := []string{fmt.Sprintf("%s last=9-1 read=9 9-1:%s:0", next.ReadGroup(), next.Token())}
	if !slices.Equal(before, want) {
		t.Fatalf("the successor's group: %v\nwant %v (what the stale owner read carried to it)", before, want)
	}
	if err := b.AckEntries(ctx, l, g, last, false); !errors.Is(err, ErrFenced) {
		t.Fatalf("a stale ack: %v, want ErrFenced", err)
	}
	if _, _, err := b.ReadAhead(ctx, l, g, lanes, 4, nil, ReadFlags{Settled: true}); !errors.Is(err, ErrFenced) {
		t.Fatalf("a stale read: %v, want ErrFenced", err)
	}
	if got := laneGroups(t, ctx, c, s.stream); !slices.Equal(got, before) {
		t.Fatalf("the stale owner changed the successor's group: %v, want %v", got, before)
	}
	// The successor's first read hands 9-1 over first.
	es, _, err := b.ReadAhead(ctx, next, next.ReadGroup(), lanes, 4, nil, ReadFlags{})
	if err != nil || len(es) == 0 || es[0].ID != "9-1" || !es[0].Pending || es[0].Deliveries != 1 {
		t.Fatalf("the successor's first read: %+v, %v; want 9-1 pending, delivered once", es, err)
	}
}

// A plain read Redis runs twice (go-redis resends a pipeline whose reply
// it lost; a proxy may replay one) answers as round.lua would: the second
// run finds what the first delivered pending (and its acks done), so the
// slice goes again as round.lua's, which hands those entries back first.
// Without the check the second run's read skipped them.
func TestBatcherPlainReadRunTwice(t *testing.T) {
	tests := []struct {
		name string
		// read sends the read under test; the owner read 1-1 and 2-1.
		read  func(ctx context.Context, b *Batcher, l Lease, es []Entry) ([]Entry, error)
		first string // the entry the read returns first
		want  []string
	}{
		{"a read carrying the acks", func(ctx context.Context, b *Batcher, l Lease, es []Entry) ([]Entry, error) {
			got, _, err := b.ReadAhead(ctx, l, l.ReadGroup(), []string{es[0].Stream}, 2, es, ReadFlags{Settled: true})
			return got, err
		}, "3-1", nil},
		{"a read after acks sent alone", func(ctx context.Context, b *Batcher, l Lease, es []Entry) ([]Entry, error) {
			if err := b.AckEntries(ctx, l, l.ReadGroup(), es, false); err != nil {
				return nil, err
			}
			got, _, err := b.ReadAhead(ctx, l, l.ReadGroup(), []string{es[0].Stream}, 2, nil, ReadFlags{Settled: true})
			return got, err
		}, "3-1", nil},
		{"a prefetch holding 1-1 and 2-1", func(ctx context.Context, b *Batcher, l Lease, es []Entry) ([]Entry, error) {
			got, _, err := b.ReadNew(l, l.ReadGroup(), []string{es[0].Stream}, 2, nil, es, true).Wait(ctx)
			return got, err
		}, "3-1", []string{"3-1", "4-1"}},
	}
	for _, tc := range tests {
		for _, f := range redistest.Faults {
			t.Run(fmt.Sprintf("%s/%s", tc.name, f), func(t *testing.T) {
				s := newPlainScene(t, 6, false)
				c, ctx, l := s.c.(*redis.Client), s.ctx, s.lease
				es := s.firstRead(t, NewBatcher(c))
				lost := &redistest.LostReply{}
				lc := redis.NewClient(&redis.Options{Addr: c.Options().Addr, Dialer: lost.Dialer(nil), ReadTimeout: time.Second})
				t.Cleanup(func() { lc.Close() })
				lost.Arm(func(args []string) bool { return len(args) > 0 && args[0] == "XREADGROUP" }, f, 1)
				got, err := tc.read(ctx, NewBatcher(lc), l, es)
				if err != nil || lost.Lost() != 1 || len(got) == 0 || got[0].ID != tc.first {
					t.Fatalf("a read run twice (lost %d): %v, %v; want %s first", lost.Lost(), ids(got), err, tc.first)
				}
				if tc.want != nil && !slices.Equal(ids(got), tc.want) {
					t.Fatalf("a read run twice: %v, want %v", ids(got), tc.want)
				}
			})
		}
	}
}

// A partition's plain read covers its backfill lane as round.lua's does:
// entries of the stream say more may wait while the backfill lane exists,
// and when the stream has nothing new, round.lua reads the backfill lane.
func TestBatcherPlainBackfill(t *testing.T) {
	s := newPlainScene(t, 2, false)
	c, ctx, l := s.c, s.ctx, s.lease
	fill := BackfillStream("o", "k", "backfill")
	c.XAdd(ctx, &redis.XAddArgs{Stream: fill, ID: "1-2", Values: []any{"n", "b"}})
	lanes := []string{s.stream, fill}
	g := l.ReadGroup()
	b := NewBatcher(c)
	es, more, err := b.ReadAhead(ctx, l, g, lanes[:1], 1, nil, ReadFlags{})
	if err != nil || !slices.Equal(ids(es), []string{"1-1"}) {
		t.Fatalf("first read: %v more %v, %v", ids(es), more, err)
	}
	n0 := scriptCalls(ctx, t, c.(*redis.Client))
	es, more, err = b.ReadAhead(ctx, l, g, lanes, 4, es, ReadFlags{Settled: true})
	if err != nil || !slices.Equal(ids(es), []string{"2-1"}) || !more || scriptCalls(ctx, t, c.(*redis.Client)) != n0 {
		t.Fatalf("a plain read beside a backfill lane: %v more %v, %v; want 2-1, more, no script", ids(es), more, err)
	}
	es, more, err = b.ReadAhead(ctx, l, g, lanes, 4, es, ReadFlags{Settled: true})
	if err != nil || len(es) != 1 || es[0].ID != "1-2" || es[0].Stream != fill {
		t.Fatalf("the stream drained: %+v more %v, %v; want the backfill's 1-2", es, more, err)
	}
	if n := scriptCalls(ctx, t, c.(*redis.Client)); n != n0+1 {
		t.Fatalf("%d scripts read the backfill lane; want round.lua's one", n-n0)
	}
}

// A plain read that finds the partition paused has delivered entries its
// owner never sees (the pipeline's XREADGROUP runs whatever the HGET
// finds): their delivery goes back, so a pause does not count toward
// MaxDeliveries, and the read after Resume hands them over delivered once.
// Without the give-back each came back delivered twice.
func TestBatcherPlainPauseGivesDeliveryBack(t *testing.T) {
	s := newPlainScene(t, 6, false)
	c, ctx, l := s.c, s.ctx, s.lease
	g, lanes := l.ReadGroup(), []string{s.stream}
	b := NewBatcher(c)
	es := s.firstRead(t, b)
	c.HSet(ctx, MetaKey(s.ref.Key), MetaPaused, "{}")
	if _, _, err := b.ReadAhead(ctx, l, g, lanes, 2, es, ReadFlags{Settled: true}); !errors.Is(err, ErrPaused) {
		t.Fatalf("a read of a paused partition: %v, want ErrPaused", err)
	}
	want := []string{fmt.Sprintf("%s last=4-1 read=4 3-1:%s:0 4-1:%s:0", g, l.Token(), l.Token())}
	if got := laneGroups(t, ctx, c, s.stream); !slices.Equal(got, want) {
		t.Fatalf("after the paused read: %v\nwant %v (delivered, the delivery given back)", got, want)
	}
	c.HDel(ctx, MetaKey(s.ref.Key), MetaPaused)
	es, _, err := b.ReadAhead(ctx, l, g, lanes, 2, nil, ReadFlags{})
	if err != nil || len(es) != 1 || es[0].ID != "3-1" || es[0].Deliveries != 1 {
		t.Fatalf("the read after Resume: %+v, %v; want 3-1 delivered once", es, err)
	}
}

// A plain read-new whose answer was not clean goes again as round.lua's
// read-new, which hands back what the plain read delivered counting
// nothing: their one delivery stands. When it hands nothing back (a
// pause), the delivery goes back, for the pending pass that will.
func TestBatcherPlainReadNewDeliveries(t *testing.T) {
	tests := []struct {
		name  string
		prep  func(s *plainScene, b *Batcher, held []Entry) []Entry // returns the acks to carry
		err   error
		want  []string // entries returned
		group string   // pending: id:count...
	}{
		{"an ack of fewer ids", func(s *plainScene, b *Batcher, held []Entry) []Entry {
			if err := b.AckEntries(s.ctx, s.lease, s.lease.ReadGroup(), held[:1], false); err != nil {
				panic(err)
			}
			return held[:1]
		}, nil, []string{"3-1", "4-1"}, "2-1:1 3-1:1 4-1:1"},
		{"paused", func(s *plainScene, b *Batcher, held []Entry) []Entry {
			s.c.HSet(s.ctx, MetaKey(s.ref.Key), MetaPaused, "{}")
			return nil
		}, ErrPaused, nil, "1-1:1 2-1:1 3-1:0 4-1:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newPlainScene(t, 6, false)
			c, ctx, l := s.c, s.ctx, s.lease
			g, lanes := l.ReadGroup(), []string{s.stream}
			b := NewBatcher(c)
			held := s.firstRead(t, b)
			acks := tc.prep(s, b, held)
			es, _, err := b.ReadNew(l, g, lanes, 2, acks, held[len(acks):], true).Wait(ctx)
			if !errors.Is(err, tc.err) || !slices.Equal(ids(es), tc.want) {
				t.Fatalf("read-new: %v, %v; want %v, %v", ids(es), err, tc.want, tc.err)
			}
			pending := g + " last=4-1 read=4"
			for _, p := range strings.Fields(tc.group) {
				id, n, _ := strings.Cut(p, ":")
				pending += fmt.Sprintf(" %s:%s:%s", id, l.Token(), n)
			}
			if got := laneGroups(t, ctx, c, s.stream); !slices.Equal(got, []string{pending}) {
				t.Fatalf("after: %v\nwant %v", got, pending)
			}
		})
	}
}
