package membership

import (
	"testing"
	"time"
)

// The stall rule: one failing partition never stalls; the second distinct
// one does, for a hold that doubles with each stall up to maxStallHold; a
// stall's end forgets the failures, and a success resets everything.
func TestStrikes(t *testing.T) {
	var s strikes
	t0 := time.Unix(1000, 0)
	s.fail("p1", t0)
	s.fail("p1", t0)
	if s.stalled(t0) {
		t.Fatal("stalled on one partition")
	}
	s.fail("p2", t0)
	if !s.stalled(t0) || s.hold != stallHold {
		t.Fatalf("after two partitions: stalled %v, hold %v", s.stalled(t0), s.hold)
	}
	t1 := t0.Add(stallHold)
	if s.stalled(t1) || len(s.failed) != 0 {
		t.Fatalf("the hold ended: stalled %v, failed %v", s.stalled(t1), s.failed)
	}
	s.fail("p1", t1)
	s.fail("p2", t1)
	if !s.stalled(t1) || s.hold != 2*stallHold {
		t.Fatalf("second stall: hold %v, want %v", s.hold, 2*stallHold)
	}
	for i := 0; i < 10; i++ {
		t1 = s.until
		s.stalled(t1)
		s.fail("p1", t1)
		s.fail("p2", t1)
	}
	if s.hold != maxStallHold {
		t.Fatalf("hold %v, want the cap %v", s.hold, maxStallHold)
	}
	s.ok()
	if s.stalled(t1) || s.hold != 0 || len(s.failed) != 0 {
		t.Fatalf("after a success: %+v", s)
	}
}
