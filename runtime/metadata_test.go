package runtime

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Finding 8 of issue #11: a message published twice with the same id is
// stored once, and a handler sees the entry id, the message id, the
// publish time, its attempt, the delivery count and the lease generation.
// On a single Redis and on a cluster (where the append is its own step).
func TestMessageIDAndMetadata(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { messageIDAndMetadata(t, newRedis(t)) })
	t.Run("cluster", func(t *testing.T) { messageIDAndMetadata(t, newRedisCluster(t)) })
}

func messageIDAndMetadata(t *testing.T, c redis.UniversalClient) {
	ctx := ctxT(t)
	var mu sync.Mutex
	var seen []MessageInfo
	failedOnce := false
	h := keyedHandler("h", func(ctx context.Context, e *testEvent) error {
		mi, ok := MessageFromContext(ctx)
		if !ok {
			return Permanent(errors.New("no MessageInfo"))
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, mi)
		if e.Seq == 2 && !failedOnce {
			failedOnce = true
			return errors.New("first attempt fails")
		}
		return nil
	})
	startEngine(t, c, fastOptions("r1"), h)
	p := NewPublisher(c)
	before := time.Now().Add(-time.Second)
	for _, pub := range []struct {
		m    *testEvent
		opts []PublishOption
	}{
		{ev("a", 1), []PublishOption{WithMessageID("m-1")}},
		{ev("a", 1), []PublishOption{WithMessageID("m-1")}}, // a retried publish: stored once
		{ev("a", 2), []PublishOption{WithMessageID("m-2")}},
		{ev("a", 3), nil},
	} {
		if err := p.Publish(ctx, pub.m, pub.opts...); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"", "m\x1b", "m-\xff"} {
		if err := p.Publish(ctx, ev("a", 9), WithMessageID(bad)); !errors.Is(err, ErrInvalidMessageID) {
			t.Errorf("message id %q: %v, want ErrInvalidMessageID", bad, err)
		}
	}
	eventually(t, 20*time.Second, "a's events handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 4
	})
	mu.Lock()
	defer mu.Unlock()
	var ids []string
	var attempts []int
	for _, mi := range seen {
		ids = append(ids, mi.MessageID)
		attempts = append(attempts, mi.Attempt)
		if mi.EntryID == "" || mi.Stream == "" || mi.Generation == 0 || mi.Deliveries < 1 || mi.PublishedAt.Before(before) {
			t.Errorf("incomplete MessageInfo %+v", mi)
		}
	}
	if !slices.Equal(ids[:3], []string{"m-1", "m-2", "m-2"}) || len(ids) != 4 || ids[3] == "" || ids[3] == "m-2" {
		t.Errorf("handled message ids %v, want m-1 once, m-2 twice (a retry), then a generated one", ids)
	}
	if !slices.Equal(attempts, []int{1, 1, 2, 1}) {
		t.Errorf("attempts %v, want [1 1 2 1]", attempts)
	}
	if n := c.XLen(ctx, rdb.PartitionStream("order", "a")).Val(); n > 3 {
		t.Errorf("%d entries on a's stream: the duplicate was stored", n)
	}
}

// WaitForReplicas waits for the replicas of the partition's server: with
// one replica attached the publish returns once it has the entry; asking
// for more than there are fails with ErrNotDurable, the entry stored.
func TestWaitForReplicas(t *testing.T) {
	ctx := ctxT(t)
	primary := redistest.New(t)
	_, port, _ := strings.Cut(primary.Addr, ":")
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	replica, err := redistest.StartConfig(sctx, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Close() })
	c := redis.NewClient(&redis.Options{Addr: primary.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	eventually(t, 20*time.Second, "the replica in sync", func() bool {
		info := c.Info(ctx, "replication").Val()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	})
	p := NewPublisher(c)
	if err := p.Publish(ctx, ev("a", 1), WaitForReplicas(1, 10*time.Second)); err != nil {
		t.Fatalf("publish waiting for 1 replica: %v", err)
	}
	err = p.Publish(ctx, ev("a", 2), WaitForReplicas(2, 100*time.Millisecond))
	if !errors.Is(err, ErrNotDurable) {
		t.Fatalf("publish waiting for 2 replicas of 1: %v, want ErrNotDurable", err)
	}
	if n := c.XLen(ctx, rdb.PartitionStream("order", "a")).Val(); n != 2 {
		t.Fatalf("%d entries stored, want 2 (not durable is still stored)", n)
	}
	cl := newRedisCluster(t) // masters without replicas
	err = NewPublisher(cl).Publish(ctx, ev("a", 1), WaitForReplicas(1, 100*time.Millisecond))
	if !errors.Is(err, ErrNotDurable) {
		t.Fatalf("cluster publish waiting for a replica: %v, want ErrNotDurable", err)
	}
}

// MessageFromContext copies contract's MessageInfo field by field (its
// Replay has another type, so it does not convert): every field must be
// copied, as a new field would be forgotten silently.
func TestMessageFromContextCopiesEveryField(t *testing.T) {
	in := executor.MessageInfo{Stream: "s", EntryID: "1-0", MessageID: "m", PublishedAt: time.Unix(5, 0), Attempt: 2,
		Deliveries: 3, Generation: 4, Replay: &executor.ReplayInfo{OriginalStream: "o", OriginalEntryID: "0-1", DLQ: "d", DLQEntryID: "2-0", Handler: "h"}}
	got, ok := MessageFromContext(executor.WithMessage(context.Background(), in))
	if !ok {
		t.Fatal("no MessageInfo")
	}
	gv, iv := reflect.ValueOf(got), reflect.ValueOf(in)
	if gv.NumField() != iv.NumField() {
		t.Fatalf("MessageInfo has %d fields, contract's %d", gv.NumField(), iv.NumField())
	}
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		if name == "Replay" {
			if *got.Replay != ReplayInfo(*in.Replay) {
				t.Errorf("Replay = %+v, want %+v", *got.Replay, *in.Replay)
			}
			continue
		}
		if !reflect.DeepEqual(gv.Field(i).Interface(), iv.FieldByName(name).Interface()) {
			t.Errorf("%s = %v, want %v", name, gv.Field(i), iv.FieldByName(name))
		}
	}
}
