package lease

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A handler's pause starts when a read finds it and ends when one finds
// it gone; a handler whose reads fail, with no success within two
// discovery intervals, counts as paused (unread) until a read succeeds.
func TestPausesFollowReadsAndFailClosed(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ps := NewPauses(PausesConfig{Client: c, DiscoveryInterval: 50 * time.Millisecond})
	ps.Read(ctx, "h")
	if ps.Paused("h") != nil {
		t.Fatal("paused before any pause was stored")
	}
	if err := c.HSet(ctx, rdb.ControlKey("h"), rdb.MetaPaused, "{}").Err(); err != nil {
		t.Fatal(err)
	}
	ps.Read(ctx, "h")
	hp := ps.Paused("h")
	if hp == nil || hp.unread {
		t.Fatalf("a stored pause read as %+v, want the operator's", hp)
	}
	if got := ps.Handlers(); len(got) != 1 || got[0] != "h" {
		t.Errorf("Handlers = %v, want [h]", got)
	}
	c.Del(ctx, rdb.ControlKey("h"))
	ps.Read(ctx, "h")
	if ps.Paused("h") != nil || hp.Context().Err() == nil {
		t.Fatal("the pause lives on after a read found it gone")
	}

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // never answers
	t.Cleanup(func() { down.Close() })
	failing := NewPauses(PausesConfig{Client: down, DiscoveryInterval: 50 * time.Millisecond})
	failing.Read(ctx, "h")
	hp = failing.Paused("h")
	if hp == nil || !hp.unread {
		t.Fatalf("a handler never read is %+v, want an unread pause", hp)
	}
	if r := failing.Reasons(); len(r) != 1 {
		t.Errorf("Reasons = %q, want one line", r)
	}
	failing.cfg.Client = c
	failing.Read(ctx, "h")
	if failing.Paused("h") != nil {
		t.Fatal("the unread pause lives on after a read succeeded")
	}
	failing.End()
}
