package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// On a 3-master cluster: a round of slices of several slots on one node
// runs with the cross-slot variant; the plain script declaring them all
// is refused whole (CROSSSLOT), which is why only the first slice's keys
// are declared; a slice of another node fails alone (ErrNotLocal, not
// Permanent) and is left untouched; a call sent to a node that does not
// serve the first slice's slot, or while that slot is moving with a key
// gone, is refused whole (IsMoved) with nothing applied; a slice of a
// slot moving with a key gone is ErrNotLocal with nothing applied.
func TestRoundCluster(t *testing.T) {
	ctx := ctxT(t)
	cl := redistest.NewCluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	nodeOf := clusterNodes(ctx, t, cc, cl)
	// Partitions by node, each of its own slot.
	byNode := map[int][]string{}
	used := map[int]bool{}
	for i := 0; len(byNode[0]) < 5 || len(byNode[1]) < 2; i++ {
		tag := fmt.Sprint("k", i)
		if s := slot(tag); !used[s] {
			used[s] = true
			byNode[nodeOf(s)] = append(byNode[nodeOf(s)], tag)
		}
	}
	part := func(tag string) (roundCopy, []string) {
		rc, ids := roundPartition(ctx, t, cc, tag, 2)
		if err := cc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{rc.lanes[0], ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		return rc, ids
	}
	var as, bs []roundCopy
	var aids, bids [][]string
	for _, tag := range byNode[0] {
		rc, ids := part(tag)
		as, aids = append(as, rc), append(aids, ids)
	}
	for _, tag := range byNode[1][:2] {
		rc, ids := part(tag)
		bs, bids = append(bs, rc), append(bids, ids)
	}
	states := func(rcs ...roundCopy) string {
		var b strings.Builder
		for _, rc := range rcs {
			b.WriteString(rc.state(ctx, t, cc))
		}
		return b.String()
	}
	applied := func(what string, r RoundResult, rc roundCopy, ids []string) {
		t.Helper()
		if r.Err != nil || len(r.Entries) != 1 || r.Entries[0].ID != ids[1] {
			t.Fatalf("%s: %+v, want entry %s read after the ack", what, r, ids[1])
		}
		if p := cc.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: rc.lanes[0], Group: "g", Start: "-", End: "+", Count: 10}).Val(); len(p) != 1 || p[0].ID != ids[1] {
			t.Fatalf("%s: pending %v, want only %s", what, p, ids[1])
		}
	}

	// The plain script, every key declared: refused whole.
	before := states(as[0], as[1])
	keys, args, err := BuildRound([]RoundSlice{readSlice(as[0], aids[0][0]), readSlice(as[1], aids[1][0])}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := scriptRound.Run(ctx, cc, keys, args...).Err(); !IsCrossSlot(err) {
		t.Fatalf("the plain round over two slots: %v, want CROSSSLOT", err)
	}
	if after := states(as[0], as[1]); after != before {
		t.Fatalf("a refused call changed state:\n%s\nnow\n%s", before, after)
	}
	// The flagged script too: allow-cross-slot-keys lets a script touch
	// undeclared keys of other slots, not declare them. This is why a
	// cluster round passes the other slices' keys in ARGV.
	if err := scriptRoundCrossSlot.Run(ctx, cc, keys, args...).Err(); !IsCrossSlot(err) {
		t.Fatalf("the flagged round declaring two slots: %v, want CROSSSLOT", err)
	}
	if after := states(as[0], as[1]); after != before {
		t.Fatalf("a refused call changed state:\n%s\nnow\n%s", before, after)
	}

	// Three slots of one node in one call.
	res, err := Round(ctx, cc, []RoundSlice{readSlice(as[0], aids[0][0]), readSlice(as[1], aids[1][0]), readSlice(as[2], aids[2][0])})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		applied(fmt.Sprint("slice of slot ", slot(as[i].tag)), res[i], as[i], aids[i])
	}

	// A slice of another node fails alone, untouched.
	before = states(bs[0])
	res, err = Round(ctx, cc, []RoundSlice{readSlice(as[3], aids[3][0]), readSlice(bs[0], bids[0][0])})
	if err != nil {
		t.Fatal(err)
	}
	applied("the first node's slice", res[0], as[3], aids[3])
	if e := res[1].Err; !errors.Is(e, ErrNotLocal) || Permanent(e) || res[1].Fenced() {
		t.Fatalf("another node's slice: %v, want ErrNotLocal (transient)", e)
	}
	t.Logf("another node's slice: %v", res[1].Err)
	if after := states(bs[0]); after != before {
		t.Fatalf("another node's slice changed:\n%s\nnow\n%s", before, after)
	}

	// Sent straight to a node that does not serve the first slice: MOVED,
	// nothing applied.
	before = states(as[4], bs[1])
	other := redis.NewClient(&redis.Options{Addr: cl.Nodes[1].Addr})
	t.Cleanup(func() { other.Close() })
	keys, args, err = BuildRound([]RoundSlice{readSlice(as[4], aids[4][0]), readSlice(bs[1], bids[1][0])}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := scriptRoundCrossSlot.Run(ctx, other, keys, args...).Err(); !IsMoved(err) || !strings.HasPrefix(err.Error(), "MOVED") {
		t.Fatalf("a round sent to the wrong node: %v, want MOVED", err)
	}
	if after := states(as[4], bs[1]); after != before {
		t.Fatalf("a refused call changed state:\n%s\nnow\n%s", before, after)
	}

	// as[4]'s slot starts moving to node 2 and its stream has already
	// left: as the first slice the call is refused whole (TRYAGAIN, after
	// go-redis's retries); as a later slice it fails alone, and nothing
	// of it is done (its lease, still here, is not even read).
	src, dst := cl.Nodes[0], cl.Nodes[2]
	srcID, _ := src.Do("CLUSTER", "MYID")
	dstID, _ := dst.Do("CLUSTER", "MYID")
	s := strconv.Itoa(slot(as[4].tag))
	if _, err := dst.Do("CLUSTER", "SETSLOT", s, "IMPORTING", srcID); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Do("CLUSTER", "SETSLOT", s, "MIGRATING", dstID); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(dst.Addr, ":")
	if _, err := src.Do("MIGRATE", host, port, as[4].lanes[0], "0", "5000"); err != nil {
		t.Fatal(err)
	}
	res, err = Round(ctx, cc, []RoundSlice{readSlice(as[4], aids[4][0]), readSlice(as[3])})
	if !IsMoved(err) || res != nil {
		t.Fatalf("a round whose first slot is moving: %v %v, want refused whole (TRYAGAIN)", res, err)
	}
	t.Logf("first slot moving: %v", err)
	res, err = Round(ctx, cc, []RoundSlice{readSlice(as[3]), readSlice(as[4], aids[4][0])})
	if err != nil {
		t.Fatal(err)
	}
	if e := res[1].Err; !errors.Is(e, ErrNotLocal) {
		t.Fatalf("a slice of a moving slot: %v, want ErrNotLocal", e)
	}
	if r := res[0]; r.Err != nil || len(r.Entries) != 1 || r.Entries[0].ID != aids[3][1] || !r.Entries[0].Pending {
		t.Fatalf("the slice beside it: %+v, want its pending entry", r)
	}
	// The moved stream, read on its new node (ASKING): untouched.
	conn := redis.NewClient(&redis.Options{Addr: dst.Addr}).Conn()
	t.Cleanup(func() { conn.Close() })
	if err := conn.Do(ctx, "ASKING").Err(); err != nil {
		t.Fatal(err)
	}
	p, err := conn.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: as[4].lanes[0], Group: "g", Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 1 || p[0].ID != aids[4][0] || p[0].RetryCount != 1 {
		t.Fatalf("the moving slice's stream: %v %v, want its first entry pending, delivered once", p, err)
	}
}

// clusterNodes returns a function from a hash slot to the index in
// cl.Nodes of the node serving it.
func clusterNodes(ctx context.Context, t *testing.T, cc *redis.ClusterClient, cl *redistest.Cluster) func(int) int {
	t.Helper()
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return func(s int) int {
		for _, r := range slots {
			if r.Start <= s && s <= r.End {
				for i, n := range cl.Nodes {
					if n.Addr == r.Nodes[0].Addr {
						return i
					}
				}
			}
		}
		t.Fatalf("slot %d is served by no node of %v", s, slots)
		return -1
	}
}

// The plain round runs on miniredis, where the engine's own tests run
// (LoadScripts loads it there), so registering it keeps LoadScripts
// working on an embedded Redis; the cross-slot variant is loaded on
// cluster clients only.
func TestRoundMiniredis(t *testing.T) {
	ctx := ctxT(t)
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	if err := LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	rc, ids := roundPartition(ctx, t, c, "m", 2)
	res, err := Round(ctx, c, []RoundSlice{readSlice(rc), {Op: RoundVerify, Lease: Lease{Ref: LeaseRef{Key: "none"}, Owner: "o", Generation: 1}}})
	if err != nil || res[0].Err != nil || len(res[0].Entries) != 1 || res[0].Entries[0].ID != ids[0] || !res[1].Fenced() {
		t.Fatalf("a round on miniredis: %+v %v", res, err)
	}
	t.Logf("the cross-slot variant on miniredis: %v", scriptRoundCrossSlot.Load(ctx, c).Err())
}

// roundClusterTags returns n hash tags of distinct slots served by node
// 0 of cl.
func roundClusterTags(ctx context.Context, t *testing.T, cc *redis.ClusterClient, cl *redistest.Cluster, prefix string, n int) []string {
	t.Helper()
	nodeOf := clusterNodes(ctx, t, cc, cl)
	var tags []string
	used := map[int]bool{}
	for i := 0; len(tags) < n; i++ {
		tag := fmt.Sprint(prefix, i)
		if s := slot(tag); !used[s] && nodeOf(s) == 0 {
			used[s] = true
			tags = append(tags, tag)
		}
	}
	return tags
}

func newRoundCluster(t *testing.T) (*redistest.Cluster, *redis.ClusterClient) {
	t.Helper()
	cl := redistest.NewCluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	return cl, cc
}

// At maxmemory, the cluster round runs its acks and reads as the
// unflagged single scripts do (a flags line makes Redis refuse a script
// at start when memory is over the limit, unless allow-oom).
func TestRoundClusterAtMaxmemory(t *testing.T) {
	ctx := ctxT(t)
	cl, cc := newRoundCluster(t)
	tags := roundClusterTags(ctx, t, cc, cl, "m", 2)
	var slices []RoundSlice
	var rcs []roundCopy
	var ids [][]string
	for _, tag := range tags {
		rc, id := roundPartition(ctx, t, cc, tag, 2)
		if err := cc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{rc.lanes[0], ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		rcs, ids = append(rcs, rc), append(ids, id)
		slices = append(slices, readSlice(rc, id[0]))
	}
	if _, err := cl.Nodes[0].Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	defer cl.Nodes[0].Do("CONFIG", "SET", "maxmemory", "0")
	if err := cc.Set(ctx, rcs[0].lease, roundToken, 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("a SET at maxmemory: %v, want OOM", err)
	}
	// The single script runs its ack and read.
	single, err := scriptRead.Run(ctx, cc, rcs[0].keys(), roundToken, "g", 1, 1, ids[0][0]).Result()
	if err != nil {
		t.Fatalf("read.lua at maxmemory: %v", err)
	}
	t.Logf("read.lua at maxmemory: %v", single)
	res, err := Round(ctx, cc, slices[1:])
	if err != nil {
		t.Fatalf("the cluster round at maxmemory: %v, want it run as read.lua is", err)
	}
	if r := res[0]; r.Err != nil || len(r.Entries) != 1 || r.Entries[0].ID != ids[1][1] {
		t.Fatalf("the cluster round at maxmemory: %+v, want the ack and the read applied", r)
	}
}

// A slice refused for a reason other than where its keys are served (here
// an ACL user without access to them) fails with that error, Permanent,
// not ErrNotLocal (which the caller would retry forever).
func TestRoundClusterNoPerm(t *testing.T) {
	ctx := ctxT(t)
	cl, cc := newRoundCluster(t)
	tags := roundClusterTags(ctx, t, cc, cl, "p", 2)
	a, aids := roundPartition(ctx, t, cc, tags[0], 1)
	b, _ := roundPartition(ctx, t, cc, tags[1], 1)
	for _, n := range cl.Nodes {
		if _, err := n.Do("ACL", "SETUSER", "lim", "on", ">pw", "~order:{"+tags[0]+"}*", "+@all"); err != nil {
			t.Fatal(err)
		}
	}
	lc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Username: "lim", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { lc.Close() })
	res, err := Round(ctx, lc, []RoundSlice{readSlice(a), readSlice(b)})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Err != nil || len(r.Entries) != 1 || r.Entries[0].ID != aids[0] {
		t.Fatalf("the permitted slice: %+v", r)
	}
	if e := res[1].Err; e == nil || errors.Is(e, ErrNotLocal) || !Permanent(e) {
		t.Fatalf("a slice the user may not touch: %v, want its ACL refusal, Permanent", e)
	}
	t.Logf("a slice the user may not touch: %v", res[1].Err)
}

// A call go-redis sent with ASKING to the node a slot is importing to
// (the first slice's lease had moved there) must not read another
// importing slot's lease, still on the source node, as missing: that
// slice is ErrNotLocal, not fenced.
func TestRoundClusterImportingSlice(t *testing.T) {
	ctx := ctxT(t)
	cl, cc := newRoundCluster(t)
	tags := roundClusterTags(ctx, t, cc, cl, "i", 3)
	var slices []RoundSlice
	for _, tag := range tags {
		rc := newRoundCopy(tag, false, "g")
		if err := cc.Set(ctx, rc.lease, roundToken, 0).Err(); err != nil {
			t.Fatal(err)
		}
		slices = append(slices, RoundSlice{Op: RoundVerify, Lease: roundLease(rc), Group: "g"})
	}
	// Before any slot moves, a later slice whose lease is gone is fenced
	// (probed again, its slot stable: truly missing).
	cc.Del(ctx, slices[2].Lease.Ref.Key)
	res, err := Round(ctx, cc, slices)
	if err != nil || res[0].Err != nil || res[1].Err != nil || !res[2].Fenced() {
		t.Fatalf("slots stable, the third lease gone: %+v %v, want the third fenced only", res, err)
	}
	slices = slices[:2]
	src, dst := cl.Nodes[0], cl.Nodes[2]
	srcID, _ := src.Do("CLUSTER", "MYID")
	dstID, _ := dst.Do("CLUSTER", "MYID")
	for _, tag := range tags {
		s := strconv.Itoa(slot(tag))
		if _, err := dst.Do("CLUSTER", "SETSLOT", s, "IMPORTING", srcID); err != nil {
			t.Fatal(err)
		}
		if _, err := src.Do("CLUSTER", "SETSLOT", s, "MIGRATING", dstID); err != nil {
			t.Fatal(err)
		}
	}
	// The first slice's lease moves; the second's stays on the source.
	// Its pause mark is set and moves too: Redis refuses (TRYAGAIN) a
	// call with ASKING whose declared keys in an importing slot are not
	// all there, and an unpaused partition has no mark (liveness only:
	// such a call goes again once the migration ends).
	pause := MetaKey(slices[0].Lease.Ref.Key)
	if err := cc.HSet(ctx, pause, MetaPaused, "{}").Err(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(dst.Addr, ":")
	if _, err := src.Do("MIGRATE", host, port, "", "0", "5000", "KEYS", slices[0].Lease.Ref.Key, pause); err != nil {
		t.Fatal(err)
	}
	res, err = Round(ctx, cc, slices)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, ErrPaused) {
		t.Fatalf("the first slice, its lease and pause mark moved: %v, want paused (its lease found)", res[0].Err)
	}
	if e := res[1].Err; !errors.Is(e, ErrNotLocal) || res[1].Fenced() {
		t.Fatalf("a slice whose lease is still on the source: %v, want ErrNotLocal, not fenced", e)
	}
	t.Logf("a slice whose lease is still on the source: %v", res[1].Err)
}
