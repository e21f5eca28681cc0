package runtime

import (
	"testing"
	"time"
)

// A unit found held is skipped for one discovery interval while the
// picture changed within LeaseTTL, then for a hold that doubles up to
// LeaseTTL; a changed picture (live members or units) forgets every mark,
// and a claim forgets the unit's.
func TestHeldMemo(t *testing.T) {
	e := &Engine{o: Options{DiscoveryInterval: time.Hour, LeaseTTL: 3 * time.Hour}, held: map[string]*heldMemo{}}
	if e.skipHeld("h", "u1", 2, 10) {
		t.Fatal("skipped before any mark")
	}
	// Within LeaseTTL of a change of the picture the hold stays one
	// interval; pretend the change is older.
	e.markHeld("h", "u1")
	e.markHeld("h", "u1")
	if got := e.held["h"].marks["u1"].hold; got != time.Hour {
		t.Fatalf("hold %v right after a change, want one interval", got)
	}
	e.held["h"].since = time.Now().Add(-4 * time.Hour)
	delete(e.held["h"].marks, "u1")
	e.markHeld("h", "u1")
	if !e.skipHeld("h", "u1", 2, 10) || e.skipHeld("h", "u2", 2, 10) {
		t.Fatal("the mark must hold u1 only")
	}
	if got := e.held["h"].marks["u1"].hold; got != time.Hour {
		t.Fatalf("first hold %v, want the discovery interval", got)
	}
	e.markHeld("h", "u1")
	e.markHeld("h", "u1")
	if got := e.held["h"].marks["u1"].hold; got != 3*time.Hour {
		t.Fatalf("hold %v, want doubled and capped at LeaseTTL", got)
	}
	if e.skipHeld("h", "u1", 3, 10) {
		t.Fatal("a member joined: the marks must be forgotten")
	}
	e.held["h"].since = time.Now().Add(-4 * time.Hour)
	e.markHeld("h", "u1")
	if e.skipHeld("h", "u1", 3, 11) {
		t.Fatal("a unit appeared: the marks must be forgotten")
	}
	e.held["h"].since = time.Now().Add(-4 * time.Hour)
	e.markHeld("h", "u1")
	e.claimedHeld("h", "u1")
	if e.skipHeld("h", "u1", 3, 11) {
		t.Fatal("claimed: the mark must be forgotten")
	}
}
