package membership

import (
	"errors"
	"testing"
	"time"
)

// A released partition is benched until its fault's Until, strikes the
// handler's work once per partition (two stall it), reaches OnFault once
// however many times it is released, and is pruned after its bench.
func TestReleaseBenchesAndStrikes(t *testing.T) {
	in := New(Config{Owner: "p1"})
	got := make(chan Fault, 4)
	in.cfg.OnFault = func(f Fault) { got <- f }
	now := time.Now()
	f := Fault{Kind: FaultReleased, Handler: "h", Stream: "s1", Err: errors.New("NOPERM"), Since: now, Until: now.Add(time.Hour)}
	in.Release("p1", f)
	in.Release("p1", f) // the worker and the heartbeat both gave up on it
	if !in.Benched("p1") || in.Benched("p2") {
		t.Fatalf("benched p1 %v, p2 %v", in.Benched("p1"), in.Benched("p2"))
	}
	if !in.Progressing("h") {
		t.Fatal("one released partition stalled the instance")
	}
	<-got
	f2 := f
	f2.Stream, f2.Since, f2.Until = "s2", now.Add(-2*time.Hour), now.Add(-time.Hour)
	in.Release("p2", f2)
	<-got
	if in.Progressing("h") || !in.Struck("h", "p2") {
		t.Fatal("two released partitions did not stall the instance")
	}
	in.PruneFaults()
	if fs := in.Faults(); len(fs) != 1 || fs[0].Stream != "s1" {
		t.Fatalf("after pruning: %+v", fs)
	}
	in.Worked("h")
	if !in.Progressing("h") {
		t.Fatal("an ack did not end the stall")
	}
	select {
	case f := <-got:
		t.Fatalf("a fault reported twice: %+v", f)
	default:
	}
}

// Unowned faults are added, seen and removed by the unowned check, and
// Reset forgets every fault of the last Run.
func TestUnownedFaultsAndReset(t *testing.T) {
	in := New(Config{Owner: "p1"})
	in.AddFault("u1", Fault{Kind: FaultUnowned, Handler: "h", Stream: "s"})
	if !in.HasFault(FaultUnowned, "u1") || in.HasFault(FaultReleased, "u1") {
		t.Fatal("HasFault does not tell the kinds apart")
	}
	if f, ok := in.RemoveFault(FaultUnowned, "u1"); !ok || f.Stream != "s" {
		t.Fatalf("RemoveFault = %+v, %v", f, ok)
	}
	in.AddFault("u1", Fault{Kind: FaultUnowned})
	in.Reset()
	if len(in.Faults()) != 0 {
		t.Fatal("Reset kept the faults")
	}
}
