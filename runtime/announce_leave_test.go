package runtime

import (
	"context"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A heartbeat's announcement that read leaving false before a graceful
// stop's leaveMembers, and is sent after it, must not put the stopping
// instance back in the member set: a live member keeps its deploy record
// for LeaseTTL (TestDeployUnderDocumentedACL once saw "deploy records of
// [second first]"). The announcement is held in flight by announceHook;
// leaveMembers runs until it returns or waits for the announcement; then
// the announcement goes on. Afterwards the instance must not be live.
func TestAnnounceInFlightDuringLeaveMembers(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if err := rdb.LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	opts := fastOptions("p1")
	e, err := NewEngine(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	const handler = "h"
	e.mu.Lock()
	e.handlers = []string{handler}
	e.mu.Unlock()
	live := func() bool {
		t.Helper()
		m, err := rdb.LiveMembers(ctx, c, handler, e.memberTTL())
		if err != nil {
			t.Fatal(err)
		}
		return m[opts.OwnerID]
	}

	// The announcement works: without it the test could not fail.
	e.announce(ctx)
	if !live() {
		t.Fatal("announce did not make the instance a live member")
	}

	entered, release := make(chan struct{}), make(chan struct{})
	e.announceHook = func() {
		close(entered)
		<-release
	}
	announced := make(chan struct{})
	go func() { defer close(announced); e.announce(ctx) }()
	<-entered // leaving read false; the send has not gone out

	left := make(chan struct{})
	go func() {
		defer close(left)
		e.leaveMembers(ctx, []consumer{{reg: Registration{Name: handler}}})
	}()
	// Let leaveMembers go as far as it can while the announcement is held:
	// to its end, or to waiting for the announcement.
	waitDoneOrBlocked(ctx, t, left, "(*Engine).leaveMembers")
	close(release)
	<-announced
	<-left

	if live() {
		t.Fatal("the instance is a live member after leaveMembers: an announcement in flight re-added it")
	}
	// And an announcement after leaving sends nothing.
	e.announceHook = func() { t.Error("announce got past the check of leaving after leaveMembers") }
	e.announce(ctx)
	if live() {
		t.Fatal("announce after leaveMembers made the instance live again")
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
