package discovery

import (
	"testing"
	"time"
)

// A unit found held is skipped for one discovery interval while the
// picture changed within LeaseTTL, then for a hold that doubles up to
// LeaseTTL; a changed picture (live members or units) forgets every mark,
// and a claim forgets the unit's.
func TestHeldMemo(t *testing.T) {
	d := New(Config{DiscoveryInterval: time.Hour, LeaseTTL: 3 * time.Hour})
	if d.skipHeld("h", "u1", 2, 10) {
		t.Fatal("skipped before any mark")
	}
	// Within LeaseTTL of a change of the picture the hold stays one
	// interval; pretend the change is older.
	d.markHeld("h", "u1")
	d.markHeld("h", "u1")
	if got := d.held["h"].marks["u1"].hold; got != time.Hour {
		t.Fatalf("hold %v right after a change, want one interval", got)
	}
	d.held["h"].since = time.Now().Add(-4 * time.Hour)
	delete(d.held["h"].marks, "u1")
	d.markHeld("h", "u1")
	if !d.skipHeld("h", "u1", 2, 10) || d.skipHeld("h", "u2", 2, 10) {
		t.Fatal("the mark must hold u1 only")
	}
	if got := d.held["h"].marks["u1"].hold; got != time.Hour {
		t.Fatalf("first hold %v, want the discovery interval", got)
	}
	d.markHeld("h", "u1")
	d.markHeld("h", "u1")
	if got := d.held["h"].marks["u1"].hold; got != 3*time.Hour {
		t.Fatalf("hold %v, want doubled and capped at LeaseTTL", got)
	}
	if d.skipHeld("h", "u1", 3, 10) {
		t.Fatal("a member joined: the marks must be forgotten")
	}
	d.held["h"].since = time.Now().Add(-4 * time.Hour)
	d.markHeld("h", "u1")
	if d.skipHeld("h", "u1", 3, 11) {
		t.Fatal("a unit appeared: the marks must be forgotten")
	}
	d.held["h"].since = time.Now().Add(-4 * time.Hour)
	d.markHeld("h", "u1")
	d.claimedHeld("h", "u1")
	if d.skipHeld("h", "u1", 3, 11) {
		t.Fatal("claimed: the mark must be forgotten")
	}
}
