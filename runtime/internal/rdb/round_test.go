package rdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// roundLease is the lease of a generated copy (roundToken's owner and
// generation), on the copy's lease key.
func roundLease(rc roundCopy) Lease {
	return Lease{Ref: LeaseRef{Key: rc.lease}, Owner: "o~x", Generation: 7}
}

// singleReply runs, on copy rc, the single scripts a round slice stands
// for (read.lua, read_oldest.lua, ack.lua once per id, verify.lua) and
// returns the reply the round should carry for it: {1, reply}, {0} when
// the single script was fenced, or {2, acked} when it found the
// partition paused (acked: how many of the ack ids were pending before,
// which the single scripts' SEQBY_PAUSED error does not say).
func singleReply(ctx context.Context, t *testing.T, c redis.UniversalClient, rc roundCopy, s RoundSlice) any {
	t.Helper()
	tok := s.Lease.Token()
	var res any
	var err error
	pending := int64(0)
	if s.AckLane > 0 {
		for _, id := range s.AckIDs {
			if ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: rc.lanes[s.AckLane-1], Group: s.Group, Start: id, End: id, Count: 1}).Result(); err == nil && len(ps) == 1 {
				pending++
			}
		}
	}
	switch s.Op {
	case RoundRead, RoundReadOldest:
		script := scriptRead
		if s.Op == RoundReadOldest {
			script = scriptReadOldest
		}
		id := ""
		if len(s.AckIDs) > 0 {
			id = s.AckIDs[0]
		}
		res, err = script.Run(ctx, c, rc.keys(), tok, s.Group, s.N, s.AckLane, id).Result()
	case RoundAck:
		var n int64
		for _, id := range s.AckIDs {
			var m int64
			m, err = scriptAck.Run(ctx, c, []string{rc.lease, rc.lanes[s.AckLane-1], MetaKey(rc.lease)}, tok, s.Group, id).Int64()
			n += m
		}
		res = n
		if len(s.AckIDs) == 0 {
			res, err = scriptVerify.Run(ctx, c, []string{rc.lease, MetaKey(rc.lease)}, tok).Result()
			res = int64(0)
		}
	case RoundVerify:
		res, err = scriptVerify.Run(ctx, c, []string{rc.lease, MetaKey(rc.lease)}, tok).Result()
	}
	if isFenceErr(err) {
		return []any{int64(0)}
	}
	if err != nil && strings.HasPrefix(err.Error(), pauseErr) {
		return []any{int64(2), pending}
	}
	if err != nil {
		t.Fatalf("single script of %c on %s: %v", s.Op, rc.tag, err)
	}
	return []any{int64(1), res}
}

// A round of many slices replies, slice by slice, exactly what the
// single scripts reply for the same state, and leaves the same state:
// random partitions (keyed ones read with R, pm ones with O, acks alone,
// verifies), each written twice under two hash tags; one copy is driven
// by the single scripts one partition at a time, the other by one round
// per step; every step acks what the previous step returned (or random
// ids), so the reads walk the pending pass, new entries, deleted
// pending entries, drained lanes and fenced leases.
func TestRoundDifferential(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	const group = "g"
	seen := map[string]int{}
	for trial := range 60 {
		rng := rand.New(rand.NewSource(int64(1000 + trial)))
		n := 1 + rng.Intn(8)
		slices := make([]RoundSlice, n)
		as, bs := make([]roundCopy, n), make([]roundCopy, n)
		ids := make([][][]string, n)
		for i := range slices {
			op := []RoundOp{RoundRead, RoundRead, RoundReadOldest, RoundReadOldest, RoundAck, RoundVerify}[rng.Intn(6)]
			pm := op == RoundReadOldest
			as[i] = newRoundCopy(fmt.Sprintf("a%d-%d", trial, i), pm, group)
			bs[i] = newRoundCopy(fmt.Sprintf("b%d-%d", trial, i), pm, group)
			var steps []roundStep
			steps, ids[i] = genRoundState(rng, len(as[i].lanes), group)
			as[i].apply(ctx, t, c, steps)
			bs[i].apply(ctx, t, c, steps)
			switch x := rng.Intn(10); {
			case x == 0: // no lease
			case x == 1:
				c.Set(ctx, as[i].lease, "o~y:9", 0)
				c.Set(ctx, bs[i].lease, "o~y:9", 0)
			case x == 2: // held, and paused
				for _, rc := range []roundCopy{as[i], bs[i]} {
					c.Set(ctx, rc.lease, roundToken, 0)
					c.HSet(ctx, MetaKey(rc.lease), MetaPaused, `{"by":"test"}`)
				}
			default:
				c.Set(ctx, as[i].lease, roundToken, 0)
				c.Set(ctx, bs[i].lease, roundToken, 0)
			}
			slices[i] = RoundSlice{Op: op, Group: group, N: 1 + rng.Intn(3)}
			if pm {
				slices[i].N = 2
			}
		}
		var last []any // the previous round's reply
		for step := range 4 {
			wants := make([]any, n)
			bslices := make([]RoundSlice, n)
			for i := range slices {
				s := &slices[i]
				s.Lanes, s.Lease = as[i].lanes, roundLease(as[i])
				s.AckLane, s.AckIDs = 0, nil
				if s.Op != RoundVerify {
					prev := []any(nil)
					if last != nil {
						if r, _ := last[i].([]any); len(r) == 2 {
							prev, _ = r[1].([]any)
						}
					}
					if l, id := lastEntry(prev); l > 0 && rng.Intn(4) > 0 {
						s.AckLane, s.AckIDs = l, []string{id}
					} else if l := rng.Intn(len(s.Lanes)); rng.Intn(2) == 0 && len(ids[i][l]) > 0 {
						s.AckLane = l + 1
						for range 1 + rng.Intn(3) {
							s.AckIDs = append(s.AckIDs, ids[i][l][rng.Intn(len(ids[i][l]))])
						}
						if s.Op != RoundAck {
							s.AckIDs = s.AckIDs[:1] // the single reads ack one id
						}
					}
				}
				wants[i] = singleReply(ctx, t, c, as[i], *s)
				bslices[i] = *s
				bslices[i].Lanes, bslices[i].Lease = bs[i].lanes, roundLease(bs[i])
			}
			keys, args, err := BuildRound(bslices, false)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := scriptRound.Run(ctx, c, keys, args...).Result()
			if err != nil {
				t.Fatalf("trial %d step %d: round: %v", trial, step, err)
			}
			got, _ := raw.([]any)
			if len(got) != n {
				t.Fatalf("trial %d step %d: round replied %d slices, want %d", trial, step, len(got), n)
			}
			results, err := ParseRound(bslices, raw)
			if err != nil {
				t.Fatal(err)
			}
			for i := range slices {
				if w, g := fmt.Sprintf("%#v", wants[i]), fmt.Sprintf("%#v", got[i]); w != g {
					t.Fatalf("trial %d step %d slice %d (%c): single scripts\n %s\nround\n %s", trial, step, i, slices[i].Op, w, g)
				}
				if sa, sb := as[i].state(ctx, t, c), bs[i].state(ctx, t, c); sa != sb {
					t.Fatalf("trial %d step %d slice %d (%c): state after the single scripts\n%s\nafter the round\n%s", trial, step, i, slices[i].Op, sa, sb)
				}
				// Parsed, the round's slice is what the single path's
				// parser makes of the single script's reply.
				w, _ := wants[i].([]any)
				r := results[i]
				switch {
				case len(w) == 1:
					if !r.Fenced() || !errors.Is(r.Err, ErrFenced) {
						t.Fatalf("trial %d step %d slice %d: %+v, want fenced", trial, step, i, r)
					}
					seen["fenced"]++
				case w[0] == int64(2):
					if !errors.Is(r.Err, ErrPaused) || r.Acked != w[1] || r.Entries != nil {
						t.Fatalf("trial %d step %d slice %d: %+v, want paused with %v acked", trial, step, i, r, w[1])
					}
					seen["paused"]++
					seen["paused acked"] += int(r.Acked)
				case r.Err != nil:
					t.Fatalf("trial %d step %d slice %d: %v", trial, step, i, r.Err)
				case slices[i].Op == RoundRead || slices[i].Op == RoundReadOldest:
					reply, _ := w[1].([]any)
					es, more, err := parseRead(as[i].lanes, reply)
					if err != nil {
						t.Fatal(err)
					}
					if we, ge := normalize([]any{es, more}, as[i].tag), normalize([]any{r.Entries, r.More}, bs[i].tag); we != ge {
						t.Fatalf("trial %d step %d slice %d: parsed single\n %s\nparsed round\n %s", trial, step, i, we, ge)
					}
					seen[string(slices[i].Op)+":"+replyKind(reply, nil)]++
				case slices[i].Op == RoundAck:
					if r.Acked != w[1] {
						t.Fatalf("trial %d step %d slice %d: acked %d, want %v", trial, step, i, r.Acked, w[1])
					}
					seen["acked"] += int(r.Acked)
				}
			}
			last = got
		}
	}
	for _, k := range []string{"fenced", "paused", "paused acked", "acked", "R:new", "R:pending", "R:drained", "R:deleted", "O:new", "O:pending", "O:drained", "O:deleted"} {
		if seen[k] == 0 {
			t.Errorf("no %s slice among %v", k, seen)
		}
	}
	t.Logf("slices seen: %v", seen)
}

// roundPartition makes a keyed partition with entries n=0..count-1 under
// a lease held by roundToken, and returns it with its entry ids.
func roundPartition(ctx context.Context, t *testing.T, c redis.UniversalClient, tag string, count int) (roundCopy, []string) {
	t.Helper()
	rc := newRoundCopy(tag, false, "g")
	var ids []string
	for i := range count {
		id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: rc.lanes[0], Values: []any{"n", fmt.Sprint(i)}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := c.XGroupCreate(ctx, rc.lanes[0], "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, rc.lease, roundToken, 0).Err(); err != nil {
		t.Fatal(err)
	}
	return rc, ids
}

// readSlice is an R slice of one entry on rc acking ids on its first lane.
func readSlice(rc roundCopy, ids ...string) RoundSlice {
	s := RoundSlice{Op: RoundRead, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 1}
	if len(ids) > 0 {
		s.AckLane, s.AckIDs = 1, ids
	}
	return s
}

// A fenced slice (another token; a deleted lease) does nothing at all,
// and the slices around it are applied.
func TestRoundFencedSlice(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var rcs []roundCopy
	var ids [][]string
	for i := range 4 {
		rc, id := roundPartition(ctx, t, c, fmt.Sprint("f", i), 3)
		// The first entry is delivered (pending), to be acked by the round.
		if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{rc.lanes[0], ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		rcs, ids = append(rcs, rc), append(ids, id)
	}
	c.Set(ctx, rcs[1].lease, "o~x:8", 0) // a newer owner
	c.Del(ctx, rcs[2].lease)
	before := []string{rcs[1].state(ctx, t, c), rcs[2].state(ctx, t, c)}
	var slices []RoundSlice
	for i, rc := range rcs {
		slices = append(slices, readSlice(rc, ids[i][0]))
	}
	res, err := Round(ctx, c, slices)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if !res[i].Fenced() || !errors.Is(res[i].Err, ErrFenced) || res[i].Entries != nil {
			t.Errorf("slice %d: %+v, want fenced", i, res[i])
		}
		if after := rcs[i].state(ctx, t, c); after != before[i-1] {
			t.Errorf("fenced slice %d changed its partition:\n%s\nnow\n%s", i, before[i-1], after)
		}
	}
	for _, i := range []int{0, 3} {
		r := res[i]
		if r.Err != nil || len(r.Entries) != 1 || r.Entries[0].ID != ids[i][1] || r.Entries[0].Pending {
			t.Errorf("slice %d: %+v, want entry %s read new after the ack", i, r, ids[i][1])
		}
		p, _ := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: rcs[i].lanes[0], Group: "g", Start: "-", End: "+", Count: 10}).Result()
		if len(p) != 1 || p[0].ID != ids[i][1] {
			t.Errorf("slice %d pending %v, want only %s", i, p, ids[i][1])
		}
	}
}

// A slice whose lane holds another type fails alone, with the server's
// WRONGTYPE reply (a redis.Error that Permanent classifies); the acks it
// applied before the failure stay applied (Redis does not roll back a
// script), and the other slices are applied.
func TestRoundSliceError(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	good, gids := roundPartition(ctx, t, c, "ok", 2)
	bad, bids := roundPartition(ctx, t, c, "bad", 2)
	acks, aids := roundPartition(ctx, t, c, "ack", 2)
	for _, rc := range []roundCopy{bad, acks} {
		if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{rc.lanes[0], ">"}, Count: 2, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.HSet(ctx, bad.lanes[1], "not", "a stream").Err(); err != nil {
		t.Fatal(err)
	}
	// The bad slice acks both its pending entries, so its pending pass
	// finds nothing on the stream and goes on to the hash.
	slices := []RoundSlice{readSlice(good), readSlice(bad, bids...),
		{Op: RoundAck, Lease: roundLease(acks), Group: "g", Lanes: acks.lanes, AckLane: 1, AckIDs: aids}}
	res, err := Round(ctx, c, slices)
	if err != nil {
		t.Fatal(err)
	}
	var re redis.Error
	if e := res[1].Err; !errors.As(e, &re) || !strings.HasPrefix(re.Error(), "WRONGTYPE") || !Permanent(e) || res[1].Fenced() {
		t.Fatalf("bad slice: %v, want its WRONGTYPE reply", e)
	}
	if n := c.XPending(ctx, bad.lanes[0], "g").Val().Count; n != 0 {
		t.Errorf("the bad slice's acks: %d still pending, want them applied before the failure", n)
	}
	if r := res[0]; r.Err != nil || len(r.Entries) != 1 || r.Entries[0].ID != gids[0] {
		t.Errorf("slice before the failure: %+v", r)
	}
	if r := res[2]; r.Err != nil || r.Acked != 2 {
		t.Errorf("slice after the failure: %+v, want 2 acked", r)
	}
}

// A read slice acks its ids (one XACK, every id) before it reads, and
// reads as FencedReadAhead does: the consumer's pending entries first,
// one at a time, an entry deleted while pending coming back with no
// fields, then new ones read ahead. A copy driven by FencedReadAhead
// reads the same at each step.
func TestRoundAcksBeforeRead(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	r, ids := roundPartition(ctx, t, c, "r", 6)
	s, sids := roundPartition(ctx, t, c, "s", 6) // the copy read by FencedReadAhead; same entries, other ids
	for _, rc := range []roundCopy{r, s} {
		if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{rc.lanes[0], ">"}, Count: 4, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.XDel(ctx, r.lanes[0], ids[1])
	c.XDel(ctx, s.lanes[0], sids[1])
	type step struct {
		acks []int // entries acked first
		want string
	}
	// Entries 0-3 are pending; 1 was deleted. Acking 0 and 2 leaves 1
	// (deleted) and 3 pending; then 4 and 5 come new, read ahead.
	for k, st := range []step{
		{[]int{0, 2}, "1:<nil>:1:pending"}, // Redis counts no delivery of a deleted entry
		{[]int{1}, "3:3:2:pending"},
		{[]int{3}, "4:4:1:new 5:5:1:new"},
		{[]int{4, 5}, ""},
	} {
		var rids, sacks []string
		for _, i := range st.acks {
			rids = append(rids, ids[i])
			sacks = append(sacks, sids[i])
		}
		sl := readSlice(r, rids...)
		sl.N = 3
		res, err := Round(ctx, c, []RoundSlice{sl})
		if err != nil || res[0].Err != nil {
			t.Fatalf("step %d: %v %+v", k, err, res)
		}
		var got []string
		for _, e := range res[0].Entries {
			got = append(got, entryString(e, ids))
		}
		if strings.Join(got, " ") != st.want {
			t.Fatalf("step %d: round read %q, want %q", k, got, st.want)
		}
		// The single path on the copy.
		for _, id := range sacks[:len(sacks)-1] {
			if err := FencedAck(ctx, c, roundLease(s), "g", s.lanes[0], id); err != nil {
				t.Fatal(err)
			}
		}
		es, more, err := FencedReadAhead(ctx, c, roundLease(s), "g", s.lanes, 3, &Entry{Stream: s.lanes[0], ID: sacks[len(sacks)-1]})
		if err != nil {
			t.Fatal(err)
		}
		var single []string
		for _, e := range es {
			single = append(single, entryString(e, sids))
		}
		if fmt.Sprint(single, more) != fmt.Sprint(got, res[0].More) {
			t.Fatalf("step %d: round read %v more=%v, FencedReadAhead %v more=%v", k, got, res[0].More, single, more)
		}
	}
}

// entryString is "index:n field:deliveries:pending|new" of an entry of
// ids.
func entryString(e Entry, ids []string) string {
	kind := "new"
	if e.Pending {
		kind = "pending"
	}
	n := "<nil>"
	if e.Fields != nil {
		n = e.Fields["n"]
	}
	i := 0
	for j, id := range ids {
		if id == e.ID {
			i = j
		}
	}
	return fmt.Sprintf("%d:%s:%d:%s", i, n, e.Deliveries, kind)
}

// BuildRound refuses a round beyond the caps (ErrRoundTooLarge) and
// malformed slices; a round at the caps runs. The script refuses a call
// whose header does not match its keys whole, before any slice runs.
func TestRoundCaps(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lease := Lease{Ref: LeaseRef{Key: "order:{c}:__lease__:g"}, Owner: "o", Generation: 1}
	verify := RoundSlice{Op: RoundVerify, Lease: lease, Group: "g"}
	read := func(lanes int) RoundSlice {
		s := RoundSlice{Op: RoundRead, Lease: lease, Group: "g", N: 1}
		for range lanes {
			s.Lanes = append(s.Lanes, "order:{c}")
		}
		return s
	}
	many := func(n int, s RoundSlice) []RoundSlice {
		out := make([]RoundSlice, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		slices []RoundSlice
		tooBig bool
	}{
		{"33 slices", many(RoundMaxSlices+1, verify), true},
		{"129 keys", append(many(RoundMaxSlices-1, read(2)), read(3)), true},
		{"1025 ack ids", []RoundSlice{{Op: RoundAck, Lease: lease, Group: "g", Lanes: []string{"s"}, AckLane: 1, AckIDs: make([]string, RoundMaxAckIDs+1)}}, true},
		{"unknown op", []RoundSlice{{Op: 'B', Lease: lease}}, false},
		{"no lease key", []RoundSlice{{Op: RoundVerify}}, false},
		{"ack lane out of range", []RoundSlice{{Op: RoundAck, Lease: lease, Lanes: []string{"s"}, AckLane: 2, AckIDs: []string{"1-0"}}}, false},
		{"ack ids without a lane", []RoundSlice{{Op: RoundAck, Lease: lease, Lanes: []string{"s"}, AckIDs: []string{"1-0"}}}, false},
		{"a verify that acks", []RoundSlice{{Op: RoundVerify, Lease: lease, Lanes: []string{"s"}, AckLane: 1, AckIDs: []string{"1-0"}}}, false},
		{"a read of 0 entries", []RoundSlice{{Op: RoundRead, Lease: lease, Lanes: []string{"s"}}}, false},
		{"more primaries than lanes", []RoundSlice{{Op: RoundReadOldest, Lease: lease, Lanes: []string{"s"}, N: 2}}, false},
	} {
		_, _, err := BuildRound(tc.slices, false)
		if err == nil || errors.Is(err, ErrRoundTooLarge) != tc.tooBig {
			t.Errorf("%s: %v, want a refusal (too large: %v)", tc.name, err, tc.tooBig)
		}
		if _, err2 := Round(ctx, c, tc.slices); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%s: Round gave %v, want BuildRound's %v", tc.name, err2, err)
		}
	}
	// At the caps: 32 slices of 4 keys (lease, pause mark, two lanes).
	c.Set(ctx, lease.Ref.Key, lease.Token(), 0)
	res, err := Round(ctx, c, many(RoundMaxSlices, read(2)))
	if err != nil || len(res) != RoundMaxSlices {
		t.Fatalf("a round at the caps: %d results, %v", len(res), err)
	}
	for i, r := range res {
		if r.Err != nil || r.Entries != nil {
			t.Fatalf("slice %d at the caps: %+v", i, r)
		}
	}
	// A malformed call: a valid ack slice, then a slice naming more keys
	// than the call has. Nothing is applied, not even the first slice.
	rc, ids := roundPartition(ctx, t, c, "m", 1)
	c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{rc.lanes[0], ">"}, Count: 1, Block: -1})
	keys, args, err := BuildRound([]RoundSlice{{Op: RoundAck, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, AckLane: 1, AckIDs: ids}, verify}, false)
	if err != nil {
		t.Fatal(err)
	}
	args[2+roundHeader+len(ids)+1] = 5 // the verify's nkeys
	if err := scriptRound.Run(ctx, c, keys, args...).Err(); err == nil || !strings.Contains(err.Error(), "round: the slices name") {
		t.Fatalf("a malformed call: %v, want refused whole", err)
	}
	if n := c.XPending(ctx, rc.lanes[0], "g").Val().Count; n != 1 {
		t.Fatalf("a malformed call applied an ack: %d pending", n)
	}
}

// rawRound builds the call of slices as BuildRound does, with no checks
// of its own, so a test can hand round.lua what BuildRound refuses.
func rawRound(t *testing.T, slices []RoundSlice) ([]string, []any) {
	t.Helper()
	var keys []string
	args := []any{len(slices), 0}
	for _, s := range slices {
		keys = append(append(keys, s.Lease.Ref.Key), s.Lanes...)
		args = append(args, string(s.Op), 1+len(s.Lanes), s.Lease.Token(), s.Group, s.N, s.AckLane, len(s.AckIDs), s.After)
		for _, id := range s.AckIDs {
			args = append(args, id)
		}
	}
	return keys, args
}

// A Lua error inside a slice (here: more ack ids than Lua's unpack
// takes, which only a call BuildRound refuses can carry) comes back as an
// ERR reply, as the single script's same error would: Permanent, not a
// transient failure to retry forever.
func TestRoundLuaErrorIsPermanent(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	rc, ids := roundPartition(ctx, t, c, "lua", 1)
	s := RoundSlice{Op: RoundAck, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, AckLane: 1}
	for range 9000 {
		s.AckIDs = append(s.AckIDs, ids[0])
	}
	keys, args := rawRound(t, []RoundSlice{s})
	raw, err := scriptRound.Run(ctx, c, keys, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	res, err := ParseRound([]RoundSlice{s}, raw)
	if err != nil {
		t.Fatal(err)
	}
	e := res[0].Err
	var re redis.Error
	if !errors.As(e, &re) || !strings.HasPrefix(re.Error(), "ERR ") || !Permanent(e) || errors.Is(e, ErrNotLocal) {
		t.Fatalf("a Lua error in a slice: %v, want an ERR reply (Permanent)", e)
	}
	t.Logf("the slice's error: %v", e)
}

// round.lua refuses a header that BuildRound would refuse, whole and
// before any slice runs: a verify with ack ids, ack ids on lane 0, a read
// of a non-numeric, zero or fractional count, a fractional key count or
// ack lane, primaries beyond the lanes.
func TestRoundHeaderRefused(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	// Every case has a partition of its own, two entries pending; rc and
	// ids name the one cases are written with, renamed per case.
	rc, ids := newRoundCopy("h", false, "g"), []string{"1-1", "2-1"}
	at := 2 + roundHeader + 1 // the second slice's header
	for i, tc := range []struct {
		name  string
		s     RoundSlice
		patch map[int]any // header offset: value
	}{
		{"a verify with ack ids", RoundSlice{Op: RoundVerify, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, AckLane: 1, AckIDs: ids[1:]}, nil},
		{"ack ids on lane 0", RoundSlice{Op: RoundAck, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, AckIDs: ids[1:]}, nil},
		{"a read of x entries", readSlice(rc, ids[1]), map[int]any{4: "x"}},
		{"a read of 0 entries", readSlice(rc, ids[1]), map[int]any{4: 0}},
		{"a read of 1.5 entries", readSlice(rc, ids[1]), map[int]any{4: "1.5"}},
		{"a read of no lanes", RoundSlice{Op: RoundRead, Lease: roundLease(rc), Group: "g", N: 1}, nil},
		{"3 primaries of 2 lanes", RoundSlice{Op: RoundReadOldest, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 3}, nil},
		{"1.5 keys", RoundSlice{Op: RoundVerify, Lease: roundLease(rc), Group: "g"}, map[int]any{1: "1.5"}},
		{"ack lane 1.5", readSlice(rc, ids[1]), map[int]any{5: "1.5"}},
		{"ack lane 0x1", readSlice(rc, ids[1]), map[int]any{5: "0x1"}},
	} {
		p, pids := roundPartition(ctx, t, c, fmt.Sprint("h", i), 2)
		if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{p.lanes[0], ">"}, Count: 2, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		ack := RoundSlice{Op: RoundAck, Lease: roundLease(p), Group: "g", Lanes: p.lanes, AckLane: 1, AckIDs: pids[:1]}
		s := tc.s
		s.Lease, s.Lanes = roundLease(p), p.lanes[:len(s.Lanes)]
		if len(s.AckIDs) > 0 {
			s.AckIDs = pids[1:]
		}
		keys, args := rawRound(t, []RoundSlice{ack, s})
		for off, v := range tc.patch {
			args[at+len(ack.AckIDs)-1+off] = v
		}
		err := scriptRound.Run(ctx, c, keys, args...).Err()
		if err == nil || !strings.Contains(err.Error(), "round: malformed header of slice 2") {
			t.Errorf("%s: %v, want the call refused whole", tc.name, err)
		}
		if n := c.XPending(ctx, p.lanes[0], "g").Val().Count; n != 2 {
			t.Errorf("%s: the call applied acks: %d pending, want 2", tc.name, n)
		}
	}
}

// The plain round (unflagged, as the single scripts) runs at maxmemory as
// they do: its acks and reads run (Redis checks memory per command in an
// unflagged script, and XACK and XREADGROUP are not refused for memory).
func TestRoundPlainAtMaxmemory(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	rc, ids := roundPartition(ctx, t, c, "oom", 2)
	if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{rc.lanes[0], ">"}, Count: 1, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer c.ConfigSet(ctx, "maxmemory", "0")
	if err := c.Set(ctx, "x", "1", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("a SET at maxmemory: %v, want OOM", err)
	}
	res, err := Round(ctx, c, []RoundSlice{readSlice(rc, ids[0])})
	if err != nil || res[0].Err != nil || len(res[0].Entries) != 1 || res[0].Entries[0].ID != ids[1] {
		t.Fatalf("the plain round at maxmemory: %+v %v, want the ack and the read applied", res, err)
	}
}

// For a cluster, BuildRound refuses a slice whose keys are in several
// slots (round.lua would take them for keys of another node) and one
// whose lease key has no hash tag but holds a '}' (round.lua cannot name
// a second key of its slot to probe with); a single Redis takes both.
func TestRoundClusterSliceSlots(t *testing.T) {
	l := func(key string) Lease { return Lease{Ref: LeaseRef{Key: key}, Owner: "o", Generation: 1} }
	for _, tc := range []struct {
		name string
		s    RoundSlice
	}{
		{"lanes of two slots", RoundSlice{Op: RoundRead, Lease: l("order:{a}:__lease__:g"), Lanes: []string{"order:{a}", "order:{b}"}, N: 1}},
		{"a lease of another slot", RoundSlice{Op: RoundRead, Lease: l("order:{b}:__lease__:g"), Lanes: []string{"order:{a}"}, N: 1}},
		{"a '}' without a tag", RoundSlice{Op: RoundVerify, Lease: l("lease}x")}},
	} {
		if _, _, err := BuildRound([]RoundSlice{tc.s}, true); err == nil {
			t.Errorf("%s: a cluster round took it", tc.name)
		}
		if _, _, err := BuildRound([]RoundSlice{tc.s}, false); err != nil {
			t.Errorf("%s: a single Redis round refused it: %v", tc.name, err)
		}
	}
	for _, key := range []string{"order:{a}:__lease__:g", "{a}:__pmlease__:p", "lease"} {
		if _, _, err := BuildRound([]RoundSlice{{Op: RoundVerify, Lease: l(key)}}, true); err != nil {
			t.Errorf("lease %s: %v", key, err)
		}
	}
}

// A read-new slice (the batched mode's prefetch) acks, then reads only new
// entries of the first lane: the owner's pending entries, which it holds
// in memory, are not handed to it again. Drained, it replies as a read
// that found nothing; a later lane that exists makes More true; fenced,
// it delivers nothing.
func TestRoundReadNew(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	rc, ids := roundPartition(ctx, t, c, "n", 5)
	read := func(s RoundSlice) RoundResult {
		t.Helper()
		res, err := Round(ctx, c, []RoundSlice{s})
		if err != nil || res[0].Err != nil {
			t.Fatalf("round %+v: %+v %v", s, res, err)
		}
		return res[0]
	}
	r := read(RoundSlice{Op: RoundRead, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 2})
	if len(r.Entries) != 2 || r.Entries[0].ID != ids[0] {
		t.Fatalf("first read: %+v, want the first two entries", r)
	}
	// 1 and 2 are pending: a read-new acks 1 and takes 3 and 4, not 2.
	s := RoundSlice{Op: RoundReadNew, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 2, AckLane: 1, AckIDs: ids[:1], After: ids[1]}
	r = read(s)
	if len(r.Entries) != 2 || r.Entries[0].ID != ids[2] || r.Entries[1].ID != ids[3] || !r.More || r.Entries[0].Deliveries != 1 || r.Entries[0].Pending {
		t.Fatalf("read-new: %+v, want entries 3 and 4, new, more waiting", r)
	}
	p, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: rc.lanes[0], Group: "g", Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 3 || p[0].ID != ids[1] || p[0].RetryCount != 1 {
		t.Fatalf("pending after the read-new: %+v %v, want 2 (delivered once), 3 and 4", p, err)
	}
	// Fenced: nothing delivered, nothing acked.
	stale := s
	stale.Lease.Generation++
	stale.AckIDs = ids[1:2]
	res, err := Round(ctx, c, []RoundSlice{stale})
	if err != nil || !res[0].Fenced() {
		t.Fatalf("a stale read-new: %+v %v, want fenced", res, err)
	}
	// The last entry, then nothing: drained, no later lane.
	r = read(RoundSlice{Op: RoundReadNew, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 2, After: ids[3]})
	if len(r.Entries) != 1 || r.Entries[0].ID != ids[4] || r.More {
		t.Fatalf("read-new of the last: %+v, want entry 5, nothing more", r)
	}
	if r = read(RoundSlice{Op: RoundReadNew, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 2, After: ids[4]}); r.Entries != nil {
		t.Fatalf("read-new of a drained lane: %+v, want none", r)
	}
	// A later lane that exists: More, though the first lane's read was short.
	six, err := c.XAdd(ctx, &redis.XAddArgs{Stream: rc.lanes[0], Values: []any{"n", "6"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: rc.lanes[1], Values: []any{"n", "b"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if r = read(RoundSlice{Op: RoundReadNew, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 2, After: ids[4]}); len(r.Entries) != 1 || !r.More {
		t.Fatalf("read-new with a backfill lane: %+v, want one entry and more", r)
	}
	// The first lane drained, the backfill lane not: a read-new finds
	// nothing and says nothing of the backfill lane (its caller must not
	// take the partition for drained: partition.collect), where a read
	// hands over the backfill entry.
	if r = read(RoundSlice{Op: RoundReadNew, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 2, After: six}); r.Entries != nil {
		t.Fatalf("read-new, first lane drained: %+v, want none", r)
	}
	pend, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: rc.lanes[0], Group: "g", Start: "-", End: "+", Count: 100}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pend {
		c.XAck(ctx, rc.lanes[0], "g", p.ID) // as if they ran
	}
	if r = read(RoundSlice{Op: RoundRead, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 2}); len(r.Entries) != 1 || r.Entries[0].Stream != rc.lanes[1] {
		t.Fatalf("read, first lane drained: %+v, want the backfill entry", r)
	}
}

// A read-new run twice (a client resent it after losing its reply; a
// proxy replayed it) hands back the entries its first run delivered, not
// the ones after them, which the owner would run first; and it says so
// for any number of entries the owner holds on the first lane, none
// included ("0"), and without counting a delivery more. BuildRound refuses a read-new without the id it reads
// after, and any other op with one.
func TestRoundReadNewRunTwice(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	rc, ids := roundPartition(ctx, t, c, "twice", 9)
	run := func(s RoundSlice) RoundResult {
		t.Helper()
		res, err := Round(ctx, c, []RoundSlice{s})
		if err != nil || res[0].Err != nil {
			t.Fatalf("round %+v: %+v %v", s, res, err)
		}
		return res[0]
	}
	r := run(RoundSlice{Op: RoundRead, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 2})
	if len(r.Entries) != 2 {
		t.Fatalf("first read: %+v", r)
	}
	// Holding 1 and 2, acking 1: the same call twice.
	s := RoundSlice{Op: RoundReadNew, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 3, AckLane: 1, AckIDs: ids[:1], After: ids[1]}
	first, again := run(s), run(s)
	if len(first.Entries) != 3 || first.Entries[0].ID != ids[2] || !slices.EqualFunc(first.Entries, again.Entries, func(a, b Entry) bool { return a.ID == b.ID }) || again.More != first.More {
		t.Fatalf("a read-new run twice: %+v then %+v, want entries 3-5 both times", first, again)
	}
	// The second run counts no delivery: the entries were delivered once.
	p, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: rc.lanes[0], Group: "g", Start: ids[2], End: ids[4], Count: 10}).Result()
	if err != nil || len(p) != 3 || p[0].RetryCount != 1 || p[2].RetryCount != 1 {
		t.Fatalf("pending after a read-new run twice: %+v %v, want entries 3-5 delivered once", p, err)
	}
	// Holding nothing on the first lane once 2-5 are acked.
	s = RoundSlice{Op: RoundReadNew, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 3, AckLane: 1, AckIDs: ids[1:5], After: "0"}
	first, again = run(s), run(s)
	if len(first.Entries) != 3 || first.Entries[0].ID != ids[5] || !slices.EqualFunc(first.Entries, again.Entries, func(a, b Entry) bool { return a.ID == b.ID }) {
		t.Fatalf("a read-new holding nothing, run twice: %+v then %+v, want entries 6-8 both times", first, again)
	}
	for _, bad := range []RoundSlice{
		{Op: RoundReadNew, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 3},
		{Op: RoundRead, Lease: roundLease(rc), Group: "g", Lanes: rc.lanes, N: 3, After: "0"},
	} {
		if _, _, err := BuildRound([]RoundSlice{bad}, false); err == nil {
			t.Errorf("BuildRound took %c with after %q", bad.Op, bad.After)
		}
	}
}
