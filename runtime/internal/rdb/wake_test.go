package rdb

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// A publish wakes the partition's owners through their own streams and
// leaves the category's stream, which every instance reads, to a new
// key, an unowned partition and a category with an unkeyed handler; an
// owner's name goes with its lease.
func TestPublishWakesTheOwners(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		stream := PartitionStream("order", "a")
		fields := []any{FieldType, "T", FieldPayload, "{}"}
		publish := func(t *testing.T, batch bool) {
			t.Helper()
			var err error
			if batch {
				e := BatchEntry{Category: "order", Key: "a", Stream: stream, Partitioned: true, Fields: fields}
				_, err = PublishBatch(ctx, c, []BatchEntry{e, e}, 100, 0)
			} else {
				err = Publish(ctx, c, "order", "a", stream, 100, fields, Once{})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		// counts returns how many signals the category's stream and the
		// owners' streams hold.
		counts := func(owners ...string) []int64 {
			out := []int64{c.XLen(ctx, SignalKey("order")).Val()}
			for _, o := range owners {
				out = append(out, c.XLen(ctx, OwnerSignalKey(o)).Val())
			}
			return out
		}
		want := func(t *testing.T, step string, got []int64, want ...int64) {
			t.Helper()
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: signals (category, owners...) = %v, want %v", step, got, want)
				}
			}
		}

		// The engines' own streams, as Run creates them: one empty signal.
		for _, o := range []string{"o~1", "p~2", "q~3"} {
			if created, err := KeepOwnerSignals(ctx, c, o, 100); err != nil || !created {
				t.Fatalf("KeepOwnerSignals(%s) = %v, %v; want it created", o, created, err)
			}
		}
		if created, err := KeepOwnerSignals(ctx, c, "o~1", 100); err != nil || created {
			t.Fatalf("KeepOwnerSignals again = %v, %v; want it renewed", created, err)
		}
		if ttl := c.PTTL(ctx, OwnerSignalKey("o~1")).Val(); ttl <= 0 || ttl > OwnerSignalTTL {
			t.Fatalf("owner's stream TTL %v, want (0, %v]", ttl, OwnerSignalTTL)
		}

		publish(t, false)
		want(t, "a new key", counts("o~1", "p~2"), 1, 1, 1)
		publish(t, false)
		want(t, "an unowned partition", counts("o~1", "p~2"), 2, 1, 1)

		lh, err := Acquire(ctx, c, PartitionLease(stream, "h"), "o~1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		lg, err := Acquire(ctx, c, PartitionLease(stream, "g"), "p~2", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.HGetAll(ctx, WakeKey(stream)).Val(); got["h"] != "o~1" || got["g"] != "p~2" || len(got) != 2 {
			t.Fatalf("wake hash after two acquires: %v", got)
		}
		publish(t, false)
		want(t, "owned by two instances", counts("o~1", "p~2"), 2, 2, 2)
		publish(t, true)
		want(t, "a batch of two", counts("o~1", "p~2"), 2, 3, 3)
		xs := c.XRange(ctx, OwnerSignalKey("o~1"), "-", "+").Val()
		if xs[1].Values["c"] != "order" || xs[1].Values["k"] != "a" {
			t.Fatalf("owner's signal: %v", xs[1].Values)
		}

		c.Set(ctx, FanoutKey("order"), "1", time.Minute)
		publish(t, false)
		want(t, "an unkeyed handler on the category", counts("o~1", "p~2"), 3, 3, 3)
		c.Del(ctx, FanoutKey("order"))

		// An owner whose stream is gone (killed, its stream expired) is
		// not signalled there, nor is its stream made again: everyone is.
		c.Del(ctx, OwnerSignalKey("p~2"))
		publish(t, false)
		want(t, "an owner's stream gone", counts("o~1", "p~2"), 4, 4, 0)
		if n := c.Exists(ctx, OwnerSignalKey("p~2")).Val(); n != 0 {
			t.Fatal("a publish created a gone owner's stream")
		}
		KeepOwnerSignals(ctx, c, "p~2", 100)

		// A release takes its owner's name out; a stale lease's release
		// leaves the next owner's.
		if err := lh.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Del(ctx, LeaseKey(stream, "g")) // p~2's lease expired
		if _, err := Acquire(ctx, c, PartitionLease(stream, "g"), "q~3", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := lg.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
		if got := c.HGetAll(ctx, WakeKey(stream)).Val(); got["g"] != "q~3" || len(got) != 1 {
			t.Fatalf("wake hash after the releases: %v, want g: q~3 alone", got)
		}
		publish(t, false)
		want(t, "after the releases", counts("o~1", "p~2", "q~3"), 4, 4, 1, 2)

		// An acquire that finds the partition cold says the group wants it
		// and nobody holds it: publishes wake everyone, so the instance
		// that found it cold tries again at once.
		c.Del(ctx, LeaseKey(stream, "g"))
		c.XTrimMaxLen(ctx, stream, 0)
		last := c.XInfoStream(ctx, stream).Val().LastGeneratedID
		eventually(t, 5*time.Second, "the Redis clock to pass the last entry", func() bool {
			return c.Time(ctx).Val().UnixMilli() > idMillis(last)+1
		})
		if _, err := AcquireWarm(ctx, c, PartitionLease(stream, "g"), "z~9", time.Minute, time.Millisecond, []string{stream}); !errors.Is(err, ErrCold) {
			t.Fatalf("acquire of an empty partition idle for over 1 ms: %v, want ErrCold", err)
		}
		if got := c.HGetAll(ctx, WakeKey(stream)).Val(); got["g"] != "" || len(got) != 1 {
			t.Fatalf("wake hash after a cold acquire: %v, want g: \"\" alone", got)
		}
		publish(t, false)
		want(t, "a partition found cold", counts("o~1", "p~2", "q~3"), 5, 4, 1, 2)
	})
}

// A pm's lease names its owner in the wake hash of every category's
// partition it covers that has a stream, a renewal or Name names it in
// one published to later, each saying where the owner is named, and a
// cold release takes the name out.
func TestPMLeaseWakesEveryCategory(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	streams := []string{PartitionStream("order", "v"), PartitionStream("pay", "v"), PartitionStream("ship", "v")}
	for _, s := range streams[:2] { // never published to ship: no name there, which no reaper would delete
		c.XAdd(ctx, &redis.XAddArgs{Stream: s, Values: []any{"n", 1}})
		c.XTrimMaxLen(ctx, s, 0)
	}
	l, err := AcquireWarm(ctx, c, PMLease("flow", "v", streams), "o~1", time.Minute, 0, streams)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams[:2] {
		if got := c.HGet(ctx, WakeKey(s), "flow").Val(); got != "o~1" {
			t.Fatalf("%s names %q, want o~1", WakeKey(s), got)
		}
	}
	if n := c.Exists(ctx, WakeKey(streams[2])).Val(); n != 0 {
		t.Fatalf("a wake hash was written for a partition without a stream")
	}
	if !slices.Equal(l.Named, []bool{true, true, false}) {
		t.Fatalf("acquire's Named = %v, want [true true false]", l.Named)
	}
	if err := LoadScripts(ctx, c); err != nil { // as an engine does at Run
		t.Fatal(err)
	}
	if named, err := l.Name(ctx, c, streams[2:]); err != nil || !slices.Equal(named, []bool{false}) {
		t.Fatalf("Name where no stream exists = %v, %v; want [false]", named, err)
	}
	if n := c.Exists(ctx, WakeKey(streams[2])).Val(); n != 0 {
		t.Fatalf("Name wrote a wake hash for a partition without a stream")
	}
	last := c.XInfoStream(ctx, streams[1]).Val().LastGeneratedID
	eventually(t, 5*time.Second, "the Redis clock to pass the last entry", func() bool {
		return c.Time(ctx).Val().UnixMilli() > idMillis(last)+1
	})
	// ship's first publish comes later, and another handler names itself
	// there: the pm's owner is named by its next renewal.
	c.XAdd(ctx, &redis.XAddArgs{Stream: streams[2], Values: []any{"n", 1}})
	c.XTrimMaxLen(ctx, streams[2], 0)
	c.HSet(ctx, WakeKey(streams[2]), "h", "p~2")
	// Twice, as go-redis resends a call whose reply was lost: the same
	// reply, the state after it.
	for range 2 {
		errs, named := RenewAll(ctx, c, []Lease{l}, nil, time.Minute)
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		if !slices.Equal(named[0], []bool{true, true, true}) {
			t.Fatalf("renewal's named = %v, want [true true true]", named[0])
		}
		if got := c.HGet(ctx, WakeKey(streams[2]), "flow").Val(); got != "o~1" {
			t.Fatalf("after a renewal %s names %q for the pm, want o~1", WakeKey(streams[2]), got)
		}
	}
	// Name does the same, fenced by the lease, and twice alike too.
	c.HDel(ctx, WakeKey(streams[2]), "flow")
	for range 2 {
		if named, err := l.Name(ctx, c, streams[1:]); err != nil || !slices.Equal(named, []bool{true, true}) {
			t.Fatalf("Name = %v, %v; want [true true]", named, err)
		}
		if got := c.HGetAll(ctx, WakeKey(streams[2])).Val(); got["flow"] != "o~1" || got["h"] != "p~2" || len(got) != 2 {
			t.Fatalf("after Name %s holds %v, want flow: o~1, h: p~2", WakeKey(streams[2]), got)
		}
	}
	c.HDel(ctx, WakeKey(streams[2]), "flow")
	stale := l
	stale.Generation--
	if _, err := stale.Name(ctx, c, streams[2:]); !errors.Is(err, ErrFenced) {
		t.Fatalf("Name with a stale token: %v, want ErrFenced", err)
	}
	if n := c.HExists(ctx, WakeKey(streams[2]), "flow").Val(); n {
		t.Fatal("Name with a stale token wrote the name")
	}
	if _, err := l.Name(ctx, c, streams[2:]); err != nil {
		t.Fatal(err)
	}
	c.HDel(ctx, WakeKey(streams[2]), "h")
	last = c.XInfoStream(ctx, streams[2]).Val().LastGeneratedID
	eventually(t, 5*time.Second, "the Redis clock to pass the last entry", func() bool {
		return c.Time(ctx).Val().UnixMilli() > idMillis(last)+1
	})
	released, err := l.ReleaseCold(ctx, c, time.Millisecond, streams)
	if err != nil || !released {
		t.Fatalf("ReleaseCold = %v, %v", released, err)
	}
	if n := c.Exists(ctx, WakeKey(streams[0]), WakeKey(streams[1]), WakeKey(streams[2])).Val(); n != 0 {
		t.Fatalf("%d wake hashes left after the cold release", n)
	}
}

// An ACL user from before owner-directed wake-ups may not HVALS: its
// publishes still store the entry and wake every instance, on a single
// Redis (where the refused read aborts the MULTI) as on a cluster.
func TestPublishWithoutHVals(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, admin redis.UniversalClient) {
		ctx := ctxT(t)
		var limited redis.UniversalClient
		setUser := func(c *redis.Client) error {
			return c.Do(ctx, "ACL", "SETUSER", "old", "on", ">pw", "+@all", "-hvals", "~*").Err()
		}
		switch a := admin.(type) {
		case *redis.ClusterClient:
			if err := a.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return setUser(c) }); err != nil {
				t.Fatal(err)
			}
			o := a.Options()
			limited = redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.Addrs, Username: "old", Password: "pw"})
		case *redis.Client:
			if err := setUser(a); err != nil {
				t.Fatal(err)
			}
			limited = redis.NewClient(&redis.Options{Addr: a.Options().Addr, Username: "old", Password: "pw"})
		}
		t.Cleanup(func() { limited.Close() })
		stream := PartitionStream("order", "a")
		admin.HSet(ctx, WakeKey(stream), "h", "o~1") // an owner named: the reads matter
		admin.SAdd(ctx, IndexKey("order"), "a")
		fields := []any{FieldType, "T", FieldPayload, "{}"}
		err := Publish(ctx, limited, "order", "a", stream, 100, fields, Once{})
		if err != nil && !errors.Is(err, ErrUnsignalled) {
			t.Fatalf("Publish without HVALS: %v", err)
		}
		e := BatchEntry{Category: "order", Key: "a", Stream: stream, Partitioned: true, Fields: fields}
		if _, err := PublishBatch(ctx, limited, []BatchEntry{e}, 100, 0); err != nil && !errors.Is(err, ErrUnsignalled) {
			t.Fatalf("PublishBatch without HVALS: %v", err)
		}
		if n := admin.XLen(ctx, stream).Val(); n != 2 {
			t.Fatalf("%d entries stored, want 2", n)
		}
		if n := admin.XLen(ctx, SignalKey("order")).Val(); n != 2 {
			t.Fatalf("%d signals on the category's stream, want 2", n)
		}
	})
}

// idMillis is the time part of a stream entry id.
func idMillis(id string) int64 {
	ms, _ := splitID(id)
	return int64(ms)
}

// A publisher whose ACL user may not write an owner's stream (a key rule
// from before owner-directed wake-ups) wakes every instance instead.
func TestPublishOwnerStreamRefused(t *testing.T) {
	admin, ctx := newRedis(t), ctxT(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "narrow", "on", ">pw", "+@all", "~order:*", "~{order}:*").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: "narrow", Password: "pw"})
	t.Cleanup(func() { c.Close() })
	KeepOwnerSignals(ctx, admin, "o~1", 100)
	stream := PartitionStream("order", "a")
	admin.SAdd(ctx, IndexKey("order"), "a")
	admin.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"n", 1}})
	admin.HSet(ctx, WakeKey(stream), "h", "o~1")
	if err := Publish(ctx, c, "order", "a", stream, 100, []any{FieldType, "T", FieldPayload, "{}"}, Once{}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if n := admin.XLen(ctx, SignalKey("order")).Val(); n != 1 {
		t.Fatalf("%d signals on the category's stream, want 1", n)
	}
}

// pipelines counts the round trips (pipelines and transactions) a client
// sends.
type pipelines struct{ n int }

func (*pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n++
		return next(ctx, cmds)
	}
}

// A publisher that remembers whom a partition's last publish woke sends
// those signals in its transaction: one round trip while the owners stay
// the same; when they changed, the signals the guess missed follow in a
// second, and a wrong guess never leaves an owner unsignalled.
func TestPublishGuessing(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	rt := &pipelines{}
	c.AddHook(rt)
	g := NewGuesses()
	stream := PartitionStream("order", "a")
	fields := []any{FieldType, "T", FieldPayload, "{}"}
	for _, o := range []string{"o~1", "p~2"} {
		KeepOwnerSignals(ctx, c, o, 100)
	}
	publish := func(t *testing.T, step string, trips int, want ...int64) {
		t.Helper()
		rt.n = 0
		if err := PublishGuessing(ctx, c, g, "order", "a", stream, 100, fields, Once{}); err != nil {
			t.Fatal(err)
		}
		got := []int64{c.XLen(ctx, SignalKey("order")).Val(), c.XLen(ctx, OwnerSignalKey("o~1")).Val(), c.XLen(ctx, OwnerSignalKey("p~2")).Val()}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: signals (category, o~1, p~2) = %v, want %v", step, got, want)
			}
		}
		if rt.n != trips {
			t.Fatalf("%s: %d round trips, want %d", step, rt.n, trips)
		}
	}
	publish(t, "a new key, no guess", 2, 1, 1, 1)
	publish(t, "unowned, no guess after a new key", 2, 2, 1, 1)
	publish(t, "unowned, guessed everyone", 1, 3, 1, 1)
	if _, err := Acquire(ctx, c, PartitionLease(stream, "h"), "o~1", time.Minute); err != nil {
		t.Fatal(err)
	}
	publish(t, "owned by o~1, guessed everyone", 1, 4, 1, 1)
	publish(t, "owned by o~1, guessed o~1", 1, 4, 2, 1)
	publish(t, "again", 1, 4, 3, 1)
	c.HSet(ctx, WakeKey(stream), "h", "p~2") // o~1's lease moved to p~2
	publish(t, "owner changed: the guess missed p~2", 2, 4, 4, 2)
	publish(t, "guessed p~2", 1, 4, 4, 3)
	c.Del(ctx, OwnerSignalKey("p~2")) // p~2 was killed, its stream expired
	publish(t, "the guessed owner's stream is gone", 2, 5, 4, 0)
	c.Set(ctx, FanoutKey("order"), "x", time.Minute)
	publish(t, "an unkeyed handler started", 2, 6, 4, 0)
}
