package membership

import (
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Liveness that means progress. Fair share divides a handler's partitions
// by the live members of its member set; an instance that announces
// itself but cannot work (its acquires fail on an ACL rule, its acks are
// refused) would be counted while owning nothing, and the others would
// stop at their share, stranding the rest.
//
// One partition failing says little about the instance (a corrupted lease
// or generation key, a lane holding something seqby did not write: every
// instance would fail on it), so an instance stalls for a handler only when
// two different partitions failed in one way since that way last
// succeeded: two acquires failing with a permanent Redis error since the
// last successful acquire, or two partitions released for permanent Redis
// errors (Release) since the last successful ack. A stalled instance
// leaves the member set at its next cycle (the heartbeat stops refreshing
// it), claims only what a share counting it would give it, and skips the
// partitions that failed. A success of the failing kind ends the stall at
// once; otherwise it ends after a hold that doubles with every stall (from
// stallHold up to maxStallHold) until a success resets it: the instance
// then rejoins and tries again, so a lasting fault costs the others at most
// one handover per hold. Transient errors (the network, a deadline) never
// count: Redis being away stalls everyone alike.

// stallHold is the first hold of a stall; maxStallHold caps its doubling.
const (
	stallHold    = 30 * time.Second
	maxStallHold = 10 * time.Minute
)

// strikes tracks the distinct partitions that failed one way since that
// way last succeeded.
type strikes struct {
	failed map[string]bool // partition ids; bounded by the units
	hold   time.Duration   // the last stall's hold (0: none since a success)
	until  time.Time       // stalled until (zero: not stalled)
}

// fail records a failure on partition id; the second distinct one stalls.
func (s *strikes) fail(id string, now time.Time) {
	if s.failed == nil {
		s.failed = map[string]bool{}
	}
	s.failed[id] = true
	if len(s.failed) >= 2 && s.until.IsZero() {
		s.hold = min(max(2*s.hold, stallHold), maxStallHold)
		s.until = now.Add(s.hold)
	}
}

// ok records a success: the stall, its failures and its hold end.
func (s *strikes) ok() { *s = strikes{} }

// stalled reports whether the stall lasts; an ended hold forgets the
// failures (the instance tries them again) but keeps the hold to double.
func (s *strikes) stalled(now time.Time) bool {
	if !s.until.IsZero() && !now.Before(s.until) {
		s.failed, s.until = nil, time.Time{}
	}
	return !s.until.IsZero()
}

// health is one handler's acquire and work strikes.
type health struct {
	acquire, work strikes
}

// healthOf returns handler's health; in.mu must be held.
func (in *Instance) healthOf(handler string) *health {
	h := in.health[handler]
	if h == nil {
		h = &health{}
		in.health[handler] = h
	}
	return h
}

// Progressing reports whether this instance counts as live for handler.
func (in *Instance) Progressing(handler string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	h, now := in.healthOf(handler), time.Now()
	return !h.acquire.stalled(now) && !h.work.stalled(now)
}

// Struck reports whether a stalled instance skips partition id of handler.
func (in *Instance) Struck(handler, id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	h, now := in.healthOf(handler), time.Now()
	return (h.acquire.stalled(now) && h.acquire.failed[id]) || (h.work.stalled(now) && h.work.failed[id])
}

// AcquireStrike counts an acquire of id that failed with a permanent
// Redis error; other failures do not count.
func (in *Instance) AcquireStrike(handler, id string, err error) {
	if !rdb.Permanent(err) || errors.Is(err, rdb.ErrLeaseHeld) {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.healthOf(handler).acquire.fail(id, time.Now())
}

// Acquired records a successful acquire for handler.
func (in *Instance) Acquired(handler string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.healthOf(handler).acquire.ok()
}

// workStrike counts partition id of handler released for permanent Redis
// errors.
func (in *Instance) workStrike(handler, id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.healthOf(handler).work.fail(id, time.Now())
	in.workStruck.Store(true)
}

// Worked records a successful ack for handler. It runs for every entry,
// so it takes the lock only once some partition was struck.
func (in *Instance) Worked(handler string) {
	if !in.workStruck.Load() {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	h := in.healthOf(handler)
	if h.work.failed != nil || !h.work.until.IsZero() || h.work.hold != 0 {
		h.work.ok()
	}
}

// liveHandlers returns those of handlers to announce as live.
func (in *Instance) liveHandlers(handlers []string) []string {
	var out []string
	for _, h := range handlers {
		if in.Progressing(h) {
			out = append(out, h)
		}
	}
	return out
}
