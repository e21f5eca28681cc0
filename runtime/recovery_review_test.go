package runtime

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Faults a review of the recovery paths found in their first version.

// replyHook delays replies: every one by every (a distant Redis), or the
// n-th owner_claim call's by nth (a GC pause, a busy core).
type replyHook struct {
	every       time.Duration
	n           int64
	nth         time.Duration
	claims      atomic.Int64
	evalshaSeen atomic.Int64
}

func (h *replyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *replyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a := cmd.Args()
		if strings.EqualFold(cmd.Name(), "evalsha") {
			h.evalshaSeen.Add(1)
		}
		if len(a) > 3 && strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") {
			if k, _ := a[3].(string); strings.HasPrefix(k, "seqby:__owner__:") && h.claims.Add(1) == h.n {
				time.Sleep(h.nth)
			}
		}
		time.Sleep(h.every)
		return err
	}
}
func (h *replyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		time.Sleep(h.every)
		return err
	}
}

// hooked is a second client of c's server with hook added.
func hooked(t *testing.T, c *redis.Client, hook redis.Hook) *redis.Client {
	h := redis.NewClient(&redis.Options{Addr: c.Options().Addr, ContextTimeoutEnabled: true})
	h.AddHook(hook)
	t.Cleanup(func() { h.Close() })
	return h
}

// With a Redis round trip above VerifyBound, attempts still start (right
// after a confirmation), and the engine stops: the first version looped
// confirming for ever, since every reply came later than the bound.
func TestAttemptsStartOverASlowLink(t *testing.T) {
	base, ctx := newRedis(t), ctxT(t)
	hook := &replyHook{every: 30 * time.Millisecond}
	var ran atomic.Int64
	h := keyedHandler("slow", func(context.Context, *testEvent) error { ran.Add(1); return nil })
	opts := fastOptions("s")
	opts.LeaseTTL, opts.HeartbeatInterval = 5*time.Second, time.Second
	r := startEngine(t, hooked(t, base, hook), opts, h)
	if err := NewPublisher(base).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the handler runs over a 30ms link", func() bool { return ran.Load() == 1 })
	r.stop()
}

// A restart with the same OwnerID after a kill waits out the dead
// holder's key even when a reply comes late: the first version measured
// the time between looks from the replies, so a late reply made the
// shrinking TTL look renewed and refused the restart.
func TestDeadOwnerKeyIsWaitedOutDespiteALateReply(t *testing.T) {
	base, ctx := newRedis(t), ctxT(t)
	if err := base.Set(ctx, rdb.OwnerKey("w1"), "w1~deadbeefdeadbeef", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	hook := &replyHook{n: 2, nth: 120 * time.Millisecond}
	opts := fastOptions("w1") // HeartbeatInterval 150ms
	r := startEngine(t, hooked(t, base, hook), opts, keyedHandler("own", func(context.Context, *testEvent) error { return nil }))
	eventually(t, 20*time.Second, "the engine takes the dead holder's OwnerID and runs", func() bool {
		return r.Status().Consuming && base.Get(ctx, rdb.OwnerKey("w1")).Val() == r.incarnation
	})
}

// An operator user without HSET (the seqbyctl ACL line before the resolved
// note) is refused before the resolve changes anything: the first version
// wrote the note last, so the head was acked and the lease deleted while
// the operator was told it failed.
func TestResolveRefusedForTheNoteChangesNothing(t *testing.T) {
	s, admin := adminRedis(t)
	ctx := ctxT(t)
	var rules []string
	for _, r := range aclRules(t, "seqbyctl", "ctl-secret", "order") {
		if r != "+hset" {
			rules = append(rules, r)
		}
	}
	if _, err := s.Do(append([]string{"ACL", "SETUSER", "oldctl"}, rules...)...); err != nil {
		t.Fatal(err)
	}
	ctl := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "oldctl", Password: "ctl-secret", ContextTimeoutEnabled: true})
	t.Cleanup(func() { ctl.Close() })
	opts := fastOptions("o1")
	opts.Retry.MaxRetries = -1
	opts.LeaseTTL, opts.HeartbeatInterval = 10*time.Second, 2*time.Second
	startEngine(t, admin, opts, keyedHandler("ops", func(context.Context, *testEvent) error { return errPoison }))
	if err := NewPublisher(admin).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	r := waitHalts(t, admin, "ops", 1)[0]
	before := snapshot(t, admin, r)
	if _, err := inspect.New(ctl).Skip(ctx, "ops", r.Partition, r.EntryID); err == nil || !refused(err.Error()) {
		t.Fatalf("skip by a user without HSET: %v, want an ACL refusal", err)
	}
	if after := snapshot(t, admin, r); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused skip changed Redis:\nbefore %+v\nafter  %+v", before, after)
	}
}
