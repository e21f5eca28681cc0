package membership

import (
	"context"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A heartbeat's announcement that read leaving false before a graceful
// stop's LeaveMembers, and is sent after it, must not put the stopping
// instance back in the member set: a live member keeps its deploy record
// for LeaseTTL (TestDeployUnderDocumentedACL once saw "deploy records of
// [second first]"). The announcement is held in flight by announceHook;
// LeaveMembers runs until it returns or waits for the announcement; then
// the announcement goes on. Afterwards the instance must not be live.
func TestAnnounceInFlightDuringLeaveMembers(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if err := rdb.LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	const owner = "p1"
	in := newInstance(c, owner)
	const handler = "h"
	handlers := []string{handler}
	live := func() bool {
		t.Helper()
		m, err := rdb.LiveMembers(ctx, c, handler, in.MemberTTL())
		if err != nil {
			t.Fatal(err)
		}
		return m[owner]
	}

	// The announcement works: without it the test could not fail.
	in.Announce(ctx, handlers)
	if !live() {
		t.Fatal("Announce did not make the instance a live member")
	}

	entered, release := make(chan struct{}), make(chan struct{})
	in.announceHook = func() {
		close(entered)
		<-release
	}
	announced := make(chan struct{})
	go func() { defer close(announced); in.Announce(ctx, handlers) }()
	<-entered // leaving read false; the send has not gone out

	left := make(chan struct{})
	go func() {
		defer close(left)
		in.LeaveMembers(ctx, handlers)
	}()
	// Let LeaveMembers go as far as it can while the announcement is held:
	// to its end, or to waiting for the announcement.
	waitDoneOrBlocked(ctx, t, left, "(*Instance).LeaveMembers")
	close(release)
	<-announced
	<-left

	if live() {
		t.Fatal("the instance is a live member after LeaveMembers: an announcement in flight re-added it")
	}
	// And an announcement after leaving sends nothing.
	in.announceHook = func() { t.Error("Announce got past the check of leaving after LeaveMembers") }
	in.Announce(ctx, handlers)
	if live() {
		t.Fatal("Announce after LeaveMembers made the instance live again")
	}
}

// The member announcement pipeline recovers from a flushed script cache
// (EVALSHA in a pipeline does not fall back to EVAL).
func TestAnnounceReloadsFlushedScripts(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	in := newInstance(c, "p1")
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	in.Announce(ctx, []string{"orders"})
	if err := c.ZScore(ctx, rdb.MembersKey("orders"), "p1").Err(); err != nil {
		t.Fatalf("not announced after SCRIPT FLUSH: %v", err)
	}
}

// Owned is asked for the handlers announced, outside announceMu.
func TestAnnounceAsksOwned(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	if err := rdb.LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	in := newInstance(c, "p1")
	var asked []string
	in.cfg.Owned = func(handlers []string) []int {
		if !in.announceMu.TryLock() {
			t.Error("Owned called under announceMu")
		} else {
			in.announceMu.Unlock()
		}
		asked = append(asked, handlers...)
		return make([]int, len(handlers))
	}
	in.Announce(ctx, []string{"a", "b"})
	if strings.Join(asked, ",") != "a,b" {
		t.Fatalf("Owned asked for %v", asked)
	}
}

// waitDoneOrBlocked returns once done is closed, or once a goroutine
// running fn is parked waiting for a sync.Mutex: a goroutine's state, read
// from the goroutine dump, not a guess at how long it takes to get there.
func waitDoneOrBlocked(ctx context.Context, t *testing.T, done <-chan struct{}, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		select {
		case <-done:
			return
		default:
		}
		n := goruntime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, fn) {
				return
			}
		}
		if err := context.Cause(ctx); err != nil {
			t.Fatalf("waiting for %s: %v", fn, err)
		}
		goruntime.Gosched()
	}
}
