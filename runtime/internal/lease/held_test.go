package lease

import (
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// testHeld holds a lease of key a on category order for handler orders,
// acquired at acquiredAt, under Leases logging to a buffer.
func testHeld(t *testing.T, leaseTTL time.Duration, acquiredAt time.Time, hooks Hooks) (*Held, *logsink.Buffer) {
	t.Helper()
	c, ctx := newRedis(t), ctxT(t)
	logs := &logsink.Buffer{}
	ls := newLeases(t, c, "p1", leaseTTL, logs)
	stream := rdb.PartitionStream("order", "a")
	l, err := rdb.Acquire(ctx, c, rdb.PartitionLease(stream, "orders"), "p1", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	return ls.Hold(ctx, Ident{Handler: "orders", Key: "a", Cats: []string{"order"}, Stream: stream}, l, acquiredAt, hooks), logs
}

// A heartbeat racing a normal handover (the worker ends, releasing the
// lease) must neither report the released lease as lost nor re-arm the
// loss timer.
func TestHandoverRacingHeartbeatIsNotALoss(t *testing.T) {
	h, logs := testHeld(t, time.Minute, time.Now(), Hooks{})
	h.End()
	// The heartbeat had picked h before End; its renew answers now:
	// either it ran before the release (renewed) or after it (not ours).
	h.Renewed(time.Now())
	h.Lost(rdb.ErrLeaseLost)
	if h.timer.Stop() {
		t.Error("a renew answered after End re-armed the loss timer")
	}
	if out := logs.String(); strings.Contains(out, "lease lost") {
		t.Errorf("a normal handover logged a lease loss:\n%s", out)
	}
}

// A halted worker's lease gone from Redis is not reported at once: the
// worker takes the cause as it ends (an operator's resolve, or a loss).
// A running worker's loss is reported, once.
func TestLostDefersAHaltedLoss(t *testing.T) {
	halted := true
	h, logs := testHeld(t, time.Minute, time.Now(), Hooks{Halted: func() bool { return halted }})
	h.Lost(rdb.ErrFenced)
	if h.Context().Err() == nil {
		t.Fatal("the context lives on after the loss")
	}
	if strings.Contains(logs.String(), "lease lost") {
		t.Errorf("a halted partition's loss was reported at once:\n%s", logs)
	}
	if cause := h.TakeLossCause(); cause != rdb.ErrFenced {
		t.Fatalf("TakeLossCause = %v, want the fenced error", cause)
	}
	if cause := h.TakeLossCause(); cause != nil {
		t.Fatalf("a second TakeLossCause = %v, want nil", cause)
	}
	if !h.End() {
		t.Error("End reports the lease not gone after a fenced call")
	}

	halted = false
	h, logs = testHeld(t, time.Minute, time.Now(), Hooks{Halted: func() bool { return halted }})
	h.Lost(rdb.ErrLeaseLost)
	h.Lost(rdb.ErrLeaseLost)
	if n := strings.Count(logs.String(), "abandoning the partition"); n != 1 {
		t.Errorf("the loss was reported %d times, want once:\n%s", n, logs)
	}
}

// The local deadline passes without a renewal: the lease counts as lost,
// and no attempt starts after it.
func TestDeadlineCancelsTheContext(t *testing.T) {
	h, _ := testHeld(t, time.Minute, time.Now().Add(-time.Hour), Hooks{})
	select {
	case <-h.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context lives on past the deadline")
	}
	if !h.deadline().Before(time.Now()) {
		t.Errorf("deadline %v is not past", h.deadline())
	}
}
