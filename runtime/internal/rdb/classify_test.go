package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// reply is an error reply as go-redis returns it.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestPermanent(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if err := c.Set(ctx, "str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "ACL", "SETUSER", "noxack", "on", ">pw", "~*", "+@all", "-xack").Err(); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: c.Options().Addr, Username: "noxack", Password: "pw"})
	defer limited.Close()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer down.Close()
	short, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-short.Done()

	tests := []struct {
		name      string
		err       error
		permanent bool
	}{
		{"WRONGTYPE from the server", c.LPush(ctx, "str", "y").Err(), true},
		{"NOPERM from the server", limited.XAck(ctx, "s", "g", "1-0").Err(), true},
		{"NOPERM inside a script", limited.Eval(ctx, "return redis.call('XACK', KEYS[1], 'g', '1-0')", []string{"s"}).Err(), true},
		{"script error", c.Eval(ctx, "return nosuchfunction()", nil).Err(), true},
		{"unknown command", c.Do(ctx, "NOSUCHCOMMAND").Err(), true},
		{"not an integer", c.Incr(ctx, "str").Err(), true},
		{"wrapped permanent", fmt.Errorf("ack: %w", reply("CROSSSLOT Keys in request don't hash to the same slot")), true},
		{"NOSCRIPT", reply("NOSCRIPT No matching script."), true},
		{"connection refused", down.Ping(ctx).Err(), false},
		{"deadline", c.Ping(short).Err(), false},
		{"LOADING", reply("LOADING Redis is loading the dataset in memory"), false},
		{"TRYAGAIN", reply("TRYAGAIN Multiple keys request during rehashing of slot"), false},
		{"CLUSTERDOWN", reply("CLUSTERDOWN The cluster is down"), false},
		{"READONLY after a failover", reply("READONLY You can't write against a read only replica."), false},
		{"MASTERDOWN", reply("MASTERDOWN Link with MASTER is down"), false},
		{"BUSY script", reply("BUSY Redis is busy running a script."), false},
		{"OOM", reply("OOM command not allowed when used memory > 'maxmemory'."), false},
		{"too many clients", reply("ERR max number of clients reached"), false},
		{"not a reply", errors.New("ERR looks like one but is not"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "nil" && tt.err == nil {
				t.Fatal("the case produced no error")
			}
			if got := Permanent(tt.err); got != tt.permanent {
				t.Errorf("Permanent(%v) = %v, want %v", tt.err, got, tt.permanent)
			}
		})
	}
}

// OwnerStates tells a held lease, a free partition with work for the group
// (undelivered or pending entries, or entries before the group exists) and
// a free one with nothing to do (acked entries still on the stream, no
// stream at all) apart.
func TestOwnerStates(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	const group = "h"
	check := func(key string) OwnerCheck {
		s := PartitionStream("order", key)
		return OwnerCheck{Lease: PartitionLease(s, group), Lanes: []string{s, BackfillStream("order", key, "__backfill")}}
	}
	add := func(key string) string {
		id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: PartitionStream("order", key), Values: []string{"k", "v"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	mkgroup := func(key string) {
		if err := c.XGroupCreateMkStream(ctx, PartitionStream("order", key), group, "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(key string) []redis.XMessage {
		res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "x", Streams: []string{PartitionStream("order", key), ">"}, Count: 1}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Messages
	}

	// held: a lease, whatever the lanes hold.
	add("held")
	if _, err := Acquire(ctx, c, check("held").Lease, "o", time.Minute); err != nil {
		t.Fatal(err)
	}
	// nogroup: entries, the group not created yet.
	add("nogroup")
	// undelivered: the group exists, an entry after its last-delivered-id.
	mkgroup("undelivered")
	add("undelivered")
	// pending: delivered, not acked.
	mkgroup("pending")
	add("pending")
	read("pending")
	// done: delivered and acked; the entry is still on the stream.
	mkgroup("done")
	add("done")
	m := read("done")
	if err := c.XAck(ctx, PartitionStream("order", "done"), group, m[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	// other: work only for another group.
	if err := c.XGroupCreateMkStream(ctx, PartitionStream("order", "other"), "someone-else", "0").Err(); err != nil {
		t.Fatal(err)
	}
	mkgroup("other")
	add("other")
	if err := c.XGroupSetID(ctx, PartitionStream("order", "other"), group, "$").Err(); err != nil {
		t.Fatal(err)
	}

	// A lease without a TTL, or of another type, blocks every acquire:
	// not owned.
	add("persisted")
	if err := c.Set(ctx, check("persisted").Lease.Key, "o:1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	add("wronglease")
	if err := c.LPush(ctx, check("wronglease").Lease.Key, "x").Err(); err != nil {
		t.Fatal(err)
	}
	// A lane that is not a stream cannot be checked.
	if err := c.Set(ctx, PartitionStream("order", "badlane"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}

	keys := []string{"held", "nogroup", "undelivered", "pending", "done", "other", "absent", "persisted", "wronglease", "badlane"}
	want := []Ownership{Owned, FreeWithWork, FreeWithWork, FreeWithWork, FreeIdle, FreeIdle, FreeIdle, FreeWithWork, FreeWithWork, Unreadable}
	var checks []OwnerCheck
	for _, k := range keys {
		checks = append(checks, check(k))
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil { // the pipeline's NOSCRIPT path
		t.Fatal(err)
	}
	got, unreadable, err := OwnerStates(ctx, c, group, checks)
	if err != nil {
		t.Fatal(err)
	}
	if unreadable == nil || !strings.Contains(unreadable.Error(), "WRONGTYPE") {
		t.Errorf("unreadable = %v, want the badlane's WRONGTYPE", unreadable)
	}
	for i, k := range keys {
		if got[i] != want[i] {
			t.Errorf("%s: got %d, want %d", k, got[i], want[i])
		}
	}
}
