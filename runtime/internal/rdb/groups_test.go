package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// laneGroups describes the consumer groups of a lane: "name last=ID
// read=N id:consumer:count..." per group, sorted.
func laneGroups(t *testing.T, ctx context.Context, c redis.UniversalClient, lane string) []string {
	t.Helper()
	gs, err := c.XInfoGroups(ctx, lane).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range gs {
		d := fmt.Sprintf("%s last=%s read=%d", g.Name, g.LastDeliveredID, g.EntriesRead)
		if g.Pending > 0 {
			ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: lane, Group: g.Name, Start: "-", End: "+", Count: 100}).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				d += fmt.Sprintf(" %s:%s:%d", p.ID, p.Consumer, p.RetryCount)
			}
		}
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// acquireGroups is AcquireAll of one lease over lanes, moving them to
// generation groups when gen.
func acquireGroups(ctx context.Context, c redis.UniversalClient, ref LeaseRef, owner string, lanes []string, gen bool) (Lease, error) {
	ls, errs := AcquireAll(ctx, c, []AcquireReq{{Ref: ref, Lanes: lanes, GenGroups: gen}}, owner, time.Minute, 0)
	return ls[0], errs[0]
}

// The acquire's move (lib/groups.lua): a lease taken for generation
// groups carries its predecessor's group whole to its own, whatever the
// predecessor (the earlier layout's shared group, a lapsed generation's,
// a parked one), so the position, the pending entries and their delivery
// counts are the same; a lease taken while earlier builds may read keeps
// the shared group; a stale owner's group is gone.
func TestAcquireMovesGroups(t *testing.T) {
	const h = "h"
	type scene struct {
		c            redis.UniversalClient
		ctx          context.Context
		stream, fill string
		ref          LeaseRef
		lanes        []string
		prev         Lease // the predecessor's lease, when a case takes one
	}
	// setup: stream 1-1..5-1, backfill 1-2; group h (earlier layout):
	// 1-1 acked, 2-1 delivered twice, 3-1 and 4-1 once, the backfill's
	// 1-2 once; all pending under "old".
	setup := func(t *testing.T) *scene {
		c, ctx := newRedis(t), ctxT(t)
		s := &scene{c: c, ctx: ctx, stream: PartitionStream("o", "k")}
		s.fill = s.stream + ":backfill"
		s.ref = PartitionLease(s.stream, h)
		s.lanes = []string{s.stream, s.fill}
		for i := 1; i <= 5; i++ {
			c.XAdd(ctx, &redis.XAddArgs{Stream: s.stream, ID: fmt.Sprintf("%d-1", i), Values: []any{"n", i}})
		}
		c.XAdd(ctx, &redis.XAddArgs{Stream: s.fill, ID: "1-2", Values: []any{"n", "b"}})
		for _, l := range s.lanes {
			if err := c.XGroupCreate(ctx, l, h, "0").Err(); err != nil {
				t.Fatal(err)
			}
		}
		c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: h, Consumer: "old", Streams: []string{s.stream, ">"}, Count: 4})
		c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: h, Consumer: "old", Streams: []string{s.fill, ">"}, Count: 1})
		c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: h, Consumer: "old", Streams: []string{s.stream, "0"}, Count: 2})
		c.XAck(ctx, s.stream, h, "1-1")
		return s
	}
	// carried is the predecessor's state under the new generation's group.
	carried := func(s *scene, l Lease) map[string][]string {
		g := GenerationGroup(h, l.Generation)
		return map[string][]string{
			s.stream: {g + " last=4-1 read=4 2-1:" + l.Token() + ":2 3-1:" + l.Token() + ":1 4-1:" + l.Token() + ":1"},
			s.fill:   {g + " last=1-2 read=1 1-2:" + l.Token() + ":1"},
		}
	}
	tests := []struct {
		name  string
		gen   bool
		prep  func(t *testing.T, s *scene)
		want  func(s *scene, l Lease) map[string][]string
		check func(t *testing.T, s *scene, l Lease)
	}{
		{name: "the shared group, for generation groups", gen: true, want: carried},
		{name: "the shared group, while earlier builds may read", gen: false,
			want: func(s *scene, l Lease) map[string][]string {
				return map[string][]string{
					s.stream: {"h last=4-1 read=4 2-1:old:2 3-1:old:1 4-1:old:1"},
					s.fill:   {"h last=1-2 read=1 1-2:old:1"},
				}
			}},
		{name: "a lapsed generation's group, without asking", gen: false,
			prep: func(t *testing.T, s *scene) {
				prev, err := acquireGroups(s.ctx, s.c, s.ref, "a", s.lanes, true)
				if err != nil || !prev.GenGroups {
					t.Fatalf("first acquire: %+v, %v", prev, err)
				}
				s.c.Del(s.ctx, s.ref.Key) // its TTL ran out
				s.prev = prev
			},
			want: carried,
			check: func(t *testing.T, s *scene, l Lease) {
				// The stale owner acks nothing and reads nothing.
				if n, err := s.c.XAck(s.ctx, s.stream, s.prev.ReadGroup(), "2-1").Result(); n != 0 || err != nil {
					t.Errorf("the stale owner's XACK: %d, %v; want 0", n, err)
				}
				err := s.c.XReadGroup(s.ctx, &redis.XReadGroupArgs{Group: s.prev.ReadGroup(), Consumer: s.prev.Token(),
					Streams: []string{s.stream, ">"}, Block: -1}).Err()
				if !IsNoGroup(err) {
					t.Errorf("the stale owner's XREADGROUP: %v; want NOGROUP", err)
				}
			}},
		{name: "an earlier build's group beside a generation's is dropped", gen: true,
			prep: func(t *testing.T, s *scene) {
				prev, err := acquireGroups(s.ctx, s.c, s.ref, "a", s.lanes, true)
				if err != nil {
					t.Fatal(err)
				}
				s.c.Del(s.ctx, s.ref.Key)
				s.c.XGroupCreate(s.ctx, s.stream, h, "0") // an earlier build's retention
				s.prev = prev
			},
			want: carried},
		{name: "a lane no group reads yet", gen: true,
			prep: func(t *testing.T, s *scene) {
				for _, l := range s.lanes {
					s.c.XGroupDestroy(s.ctx, l, h)
				}
			},
			want: func(s *scene, l Lease) map[string][]string {
				g := GenerationGroup(h, l.Generation)
				return map[string][]string{s.stream: {g + " last=0-0 read=0"}, s.fill: {g + " last=0-0 read=0"}}
			}},
		{name: "an entry deleted while pending is not carried", gen: true,
			prep: func(t *testing.T, s *scene) { s.c.XDel(s.ctx, s.stream, "3-1") },
			want: func(s *scene, l Lease) map[string][]string {
				w := carried(s, l)
				w[s.stream] = []string{strings.Replace(w[s.stream][0], " 3-1:"+l.Token()+":1", "", 1)}
				return w
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			if tt.prep != nil {
				tt.prep(t, s)
			}
			l, err := acquireGroups(s.ctx, s.c, s.ref, "me", s.lanes, tt.gen)
			if err != nil {
				t.Fatal(err)
			}
			if l.GenGroups != (tt.gen || s.prev.GenGroups) {
				t.Errorf("GenGroups = %v", l.GenGroups)
			}
			for lane, want := range tt.want(s, l) {
				if got := laneGroups(t, s.ctx, s.c, lane); !slices.Equal(got, want) {
					t.Errorf("%s:\n got %q\nwant %q", lane, got, want)
				}
			}
			if tt.check != nil {
				tt.check(t, s, l)
			}
			// Run again (a resend): the lease is the caller's own, with
			// the same groups; nothing moves.
			before := laneGroups(t, s.ctx, s.c, s.stream)
			_, err = acquireGroups(s.ctx, s.c, s.ref, "me", s.lanes, tt.gen)
			var held *HeldError
			if !errors.As(err, &held) || held.Token != l.Token() || held.GenGroups != l.GenGroups {
				t.Errorf("the acquire run again: %v (%+v); want held by %s, GenGroups %v", err, held, l.Token(), l.GenGroups)
			}
			if after := laneGroups(t, s.ctx, s.c, s.stream); !slices.Equal(after, before) {
				t.Errorf("the acquire run again moved the groups: %q, was %q", after, before)
			}
			// The new owner reads on where the predecessor stopped.
			if l.GenGroups {
				got, err := s.c.XReadGroup(s.ctx, &redis.XReadGroupArgs{Group: l.ReadGroup(), Consumer: l.Token(),
					Streams: []string{s.stream, ">"}, Block: -1}).Result()
				if err != nil || len(got[0].Messages) == 0 || got[0].Messages[0].ID != map[bool]string{true: "1-1", false: "5-1"}[tt.name == "a lane no group reads yet"] {
					t.Errorf("the new owner's first new entry: %v, %v", got, err)
				}
			}
		})
	}
}

// A graceful release of a lease reading through its generation's group
// parks every lane in the handler's h@0, pending entries with it, one
// delivery given back on those handed on unrun; the next owner's acquire
// carries them on. Run twice, the release changes nothing more.
func TestReleaseParksGroups(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := PartitionStream("o", "k")
	lanes := []string{stream, stream + ":backfill"} // no backfill lane yet
	ref := PartitionLease(stream, "h")
	for i := 1; i <= 4; i++ {
		c.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: fmt.Sprintf("%d-1", i), Values: []any{"n", i}})
	}
	l, err := acquireGroups(ctx, c, ref, "me", lanes, true)
	if err != nil || !l.GenGroups {
		t.Fatalf("acquire: %+v, %v", l, err)
	}
	read := func(id string, n int64) {
		if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: l.ReadGroup(), Consumer: l.Token(),
			Streams: []string{stream, id}, Count: n, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	read(">", 3) // 1-1 runs; 2-1 and 3-1 are read ahead
	c.XAck(ctx, stream, l.ReadGroup(), "1-1")
	read(">", 1) // 4-1 is read ahead too
	read("0", 1) // 2-1 halted, and was retried twice (the pending pass)
	read("0", 1)
	// Hand on the halted head and the entries read ahead, never run.
	give := []Entry{{Stream: stream, ID: "2-1"}, {Stream: stream, ID: "3-1"}, {Stream: stream, ID: "4-1"}}
	if err := l.ReleaseHanding(ctx, c, lanes, give); err != nil {
		t.Fatal(err)
	}
	tok := l.Token()
	want := []string{"h@0 last=4-1 read=4 2-1:" + tok + ":2 3-1:" + tok + ":0 4-1:" + tok + ":0"}
	if got := laneGroups(t, ctx, c, stream); !slices.Equal(got, want) {
		t.Fatalf("after the release:\n got %q\nwant %q", got, want)
	}
	if v, _ := c.Exists(ctx, ref.Key).Result(); v != 0 {
		t.Errorf("the lease is still there")
	}
	if err := l.ReleaseHanding(ctx, c, lanes, give); err != nil {
		t.Fatal(err)
	}
	if got := laneGroups(t, ctx, c, stream); !slices.Equal(got, want) {
		t.Errorf("the release run again:\n got %q\nwant %q", got, want)
	}
	next, err := acquireGroups(ctx, c, ref, "next", lanes, false)
	if err != nil || !next.GenGroups {
		t.Fatalf("the next acquire: %+v, %v", next, err)
	}
	tok = next.Token()
	want = []string{next.ReadGroup() + " last=4-1 read=4 2-1:" + tok + ":2 3-1:" + tok + ":0 4-1:" + tok + ":0"}
	if got := laneGroups(t, ctx, c, stream); !slices.Equal(got, want) {
		t.Errorf("after the next acquire:\n got %q\nwant %q", got, want)
	}
}

// An operator's skip of a halted head on a lane read through generation
// groups acks the head in the lane's group, whichever it is: the halted
// owner's live generation's, which is parked with it (the owner can ack
// there no more), or the parked one a release left.
func TestResolveHeadOnGenerationGroups(t *testing.T) {
	for _, released := range []bool{false, true} {
		t.Run(fmt.Sprintf("released=%v", released), func(t *testing.T) {
			c, ctx := newRedis(t), ctxT(t)
			stream := PartitionStream("o", "a")
			ref := PartitionLease(stream, "g")
			var ids []string
			for range 2 {
				ids = append(ids, c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"type", "T"}}).Val())
			}
			l, err := acquireGroups(ctx, c, ref, "w1", []string{stream}, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ReadGroup(ctx, c, stream, l.ReadGroup(), l.Token(), ">", 2, -1); err != nil {
				t.Fatal(err)
			}
			if released {
				give := []Entry{{Stream: stream, ID: ids[0]}, {Stream: stream, ID: ids[1]}}
				if err := l.ReleaseHanding(ctx, c, []string{stream}, give); err != nil {
					t.Fatal(err)
				}
			}
			r := HaltRecord{Handler: "g", Partition: stream, Category: "o", Key: "a", Stream: stream, Streams: []string{stream},
				EntryID: ids[0], Owner: "w1", Token: l.Token(), LeaseKey: ref.Key}
			b, _ := json.Marshal(r)
			c.HSet(ctx, r.RecordKey(), MetaHalt, string(b))
			if err := CheckHead(ctx, c, "g", r, string(b)); err != nil {
				t.Fatalf("CheckHead: %v", err)
			}
			if _, err := ResolveHead(ctx, c, "g", r, string(b), "", nil); err != nil {
				t.Fatalf("ResolveHead: %v", err)
			}
			n := 1
			if released {
				n = 0 // given back: read ahead, never run
			}
			want := []string{fmt.Sprintf("g@0 last=%s read=2 %s:%s:%d", ids[1], ids[1], l.Token(), n)}
			if got := laneGroups(t, ctx, c, stream); !slices.Equal(got, want) {
				t.Errorf("after the skip:\n got %q\nwant %q", got, want)
			}
			if n, _ := c.XAck(ctx, stream, l.ReadGroup(), ids[1]).Result(); n != 0 {
				t.Errorf("the halted owner acked %d after the skip", n)
			}
		})
	}
	// A DLQ move (as a skip) parks every lane of the lease, not only the
	// head's: the halted owner can neither ack nor read on its backfill
	// lane either.
	t.Run("backfill lane", func(t *testing.T) {
		c, ctx := newRedis(t), ctxT(t)
		stream, backfill := PartitionStream("o", "a"), BackfillStream("o", "a", "backfill")
		ref := PartitionLease(stream, "g")
		head := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"type", "T"}}).Val()
		old := c.XAdd(ctx, &redis.XAddArgs{Stream: backfill, Values: []any{"type", "T"}}).Val()
		l, err := acquireGroups(ctx, c, ref, "w1", []string{stream, backfill}, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReadGroup(ctx, c, stream, l.ReadGroup(), l.Token(), ">", 1, -1); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadGroup(ctx, c, backfill, l.ReadGroup(), l.Token(), ">", 1, -1); err != nil {
			t.Fatal(err)
		}
		r := HaltRecord{Handler: "g", Partition: stream, Category: "o", Key: "a", Stream: stream, Streams: []string{stream, backfill},
			EntryID: head, Owner: "w1", Token: l.Token(), LeaseKey: ref.Key}
		b, _ := json.Marshal(r)
		c.HSet(ctx, r.RecordKey(), MetaHalt, string(b))
		dlq := stream + ":dlq"
		id, err := ResolveHead(ctx, c, "g", r, string(b), dlq, []any{"why", "test"})
		if err != nil {
			t.Fatalf("ResolveHead: %v", err)
		}
		if got, _ := c.XRange(ctx, dlq, "-", "+").Result(); len(got) != 1 || got[0].ID != id ||
			got[0].Values["type"] != "T" || got[0].Values["why"] != "test" {
			t.Errorf("the dead-letter stream holds %+v, want the head's fields and the metadata as %s", got, id)
		}
		want := []string{fmt.Sprintf("g@0 last=%s read=1 %s:%s:1", old, old, l.Token())}
		if got := laneGroups(t, ctx, c, backfill); !slices.Equal(got, want) {
			t.Errorf("the backfill lane after the skip:\n got %q\nwant %q", got, want)
		}
		if n, _ := c.XAck(ctx, backfill, l.ReadGroup(), old).Result(); n != 0 {
			t.Errorf("the halted owner acked %d on its backfill lane after the skip", n)
		}
		if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: l.ReadGroup(), Consumer: l.Token(), Streams: []string{backfill, "0"}, Block: -1}).Err(); err == nil || !strings.Contains(err.Error(), "NOGROUP") {
			t.Errorf("the halted owner's read on its backfill lane after the skip: %v, want NOGROUP", err)
		}
	})
}

// Retention counts a generation's group as the registered handler's,
// trims to its position, and drops the shared group an earlier build's
// retention made beside it.
func TestTrimGenerationGroups(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := PartitionStream("o", "a")
	var ids []string
	for range 3 {
		ids = append(ids, c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"type", "T"}}).Val())
	}
	l, err := acquireGroups(ctx, c, PartitionLease(stream, "g"), "w1", []string{stream}, true)
	if err != nil {
		t.Fatal(err)
	}
	ReadGroup(ctx, c, stream, l.ReadGroup(), l.Token(), ">", 2, -1)
	c.XAck(ctx, stream, l.ReadGroup(), ids[0])
	c.XGroupCreate(ctx, stream, "g", "0") // an earlier build's retention
	n, err := Trim(ctx, c, []string{"g"}, stream)
	if err != nil || n != 1 {
		t.Fatalf("Trim: %d, %v; want the acked entry removed", n, err)
	}
	gs, _ := c.XInfoGroups(ctx, stream).Result()
	if len(gs) != 1 || gs[0].Name != l.ReadGroup() {
		t.Errorf("groups after the trim: %+v; want only %s", gs, l.ReadGroup())
	}
}

// GroupOf picks a lane's group as lib/groups.lua's group_of does.
func TestGroupOf(t *testing.T) {
	gs := func(names ...string) []redis.XInfoGroup {
		var out []redis.XInfoGroup
		for _, n := range names {
			out = append(out, redis.XInfoGroup{Name: n})
		}
		return out
	}
	tests := []struct {
		groups []redis.XInfoGroup
		want   string // "" none
	}{
		{gs(), ""},
		{gs("other", "g2", "g@x", "gg@1"), ""},
		{gs("g"), "g"},
		{gs("g", "g@0"), "g@0"},
		{gs("g@0", "g@17", "g", "g@5"), "g@17"},
	}
	for _, tt := range tests {
		g, ok := GroupOf(tt.groups, "g")
		if got := map[bool]string{true: g.Name}[ok]; got != tt.want {
			t.Errorf("GroupOf(%v) = %q, want %q", tt.groups, got, tt.want)
		}
	}
}

// At maxmemory a release still deletes the lease: parking is best effort
// (XGROUP CREATE is refused there), and the next acquire moves the group
// left behind.
func TestReleaseAtMaxmemory(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := PartitionStream("o", "k")
	ref := PartitionLease(stream, "h")
	c.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: "1-1", Values: []any{"n", 1}})
	l, err := acquireGroups(ctx, c, ref, "me", []string{stream}, true)
	if err != nil {
		t.Fatal(err)
	}
	c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: l.ReadGroup(), Consumer: l.Token(), Streams: []string{stream, ">"}, Block: -1})
	c.ConfigSet(ctx, "maxmemory-policy", "noeviction")
	c.ConfigSet(ctx, "maxmemory", "1")
	err = l.ReleaseHanding(ctx, c, []string{stream}, []Entry{{Stream: stream, ID: "1-1"}})
	c.ConfigSet(ctx, "maxmemory", "0")
	if err != nil {
		t.Fatalf("release at maxmemory: %v", err)
	}
	if n, _ := c.Exists(ctx, ref.Key).Result(); n != 0 {
		t.Fatal("the lease outlived its release")
	}
	next, err := acquireGroups(ctx, c, ref, "next", []string{stream}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{next.ReadGroup() + " last=1-1 read=1 1-1:" + next.Token() + ":1"}
	if got := laneGroups(t, ctx, c, stream); !slices.Equal(got, want) {
		t.Errorf("after the next acquire:\n got %q\nwant %q", got, want)
	}
}
