package lease

import (
	"context"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The admitted confirmation age (issue #39). An operator's Pause stores
// its mark, then waits before it returns, so that no attempt of the key
// starts after that: an attempt may start only on a lease confirmation
// that Redis ran before the mark (a later one finds it and refuses), and
// Pause must outwait the oldest such confirmation an engine still uses.
// The fence rule uses one sent at most VerifyBound earlier, but for a
// confirmation sent holding a concurrency slot (the fence rule): that one is
// the newest there can be, and on a link slower than the bound it comes
// back older. Refusing it would stop such a link for good; using it
// however old would start an attempt after Pause returned.
//
// So each engine keeps, per handler, an admitted age A, VerifyBound until
// raised. A confirmation sent holding a slot is used only if it is at
// most VerifyBound old, or at most the A that was stored in Redis
// (rdb.StoreAdmitAge, in the handler's control hash) before it was sent,
// while that record lasts. One answered later raises A to twice its age,
// at most LeaseTTL/2 (admitAgeCap), stores it and waits for Redis's
// answer (in the strict mode also for ReplicaAcks replicas, as for every
// write an attempt starts after), and only then sends a fresh
// confirmation, holding the slot, which is judged by the new A. One
// answered later than the cap starts nothing: no raise could admit it,
// so the gate backs off without the slot and confirms again. Pause reads
// A after its mark's store is answered and waits max(VerifyBound, A), and
// a margin for the clocks' rates, from that answer
// (inspect.Inspector.Pause). Why it holds: a confirmation Redis ran
// before the mark was sent at s; if it was judged by an A stored before
// s, Pause read that A or a larger one (a record is never lowered while
// it lasts), and an attempt on it starts within A of s, before Pause
// returns. If Pause read an A stored after its mark, any confirmation
// judged by it was sent after that store, so after the mark, and was
// refused as paused.
//
// A record lasts LeaseTTL from when Redis ran its store, and Pause counts
// only records that have not ended by Redis's clock; the engine relies on
// one until LeaseTTL - LeaseMargin after it sent the store (its own
// clock: LeaseMargin absorbs the clocks' rates, as it does for leases),
// and stores it again when it needs it past that. A link that recovered
// costs Pause nothing once the record has ended. The A held here is the
// one last stored, lowered too: a raise after the last record ended
// stores twice the late confirmation's age, whatever the ended one said,
// so one spike does not pin every later Pause at the cap. Lowering it
// here is always safe: a smaller A refuses more, and the older, larger
// member stays in Redis, for Pause to wait out, until its end.

// admitAges are an engine's admitted ages, by handler.
type admitAges struct {
	mu sync.Mutex
	m  map[string]*admitAge
}

// admitAge is one handler's admitted age.
type admitAge struct {
	// storing holds one token while a store is in flight: one at a time,
	// so a raise reads the age the last store left.
	storing chan struct{}
	mu      sync.Mutex
	age     time.Duration // stored (0: none: VerifyBound)
	until   time.Time     // the record lasts at least until then
}

// admitLimit is a handler's admitted age as stored before a confirmation
// was sent.
type admitLimit struct {
	age   time.Duration
	until time.Time
}

// admits reports whether an attempt may start at now on a confirmation
// sent age ago: within bound (VerifyBound, which Pause always waits), or
// within the stored age while its record lasts.
func (l admitLimit) admits(age, bound time.Duration, now time.Time) bool {
	return age <= bound || (age <= l.age && now.Before(l.until))
}

// admitAge returns handler's admitted age, made on first use.
func (ls *Leases) admitAge(handler string) *admitAge {
	ls.ages.mu.Lock()
	defer ls.ages.mu.Unlock()
	a := ls.ages.m[handler]
	if a == nil {
		if ls.ages.m == nil {
			ls.ages.m = map[string]*admitAge{}
		}
		a = &admitAge{storing: make(chan struct{}, 1)}
		ls.ages.m[handler] = a
	}
	return a
}

// limit is the admitted age stored so far.
func (a *admitAge) limit() admitLimit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return admitLimit{age: a.age, until: a.until}
}

// admitAgeCap caps the admitted age at half the lease: a link that
// answers slower than that renews leases too late to keep them, and Pause
// should not wait longer for it. A confirmation sent holding a slot that
// is older than both the cap and VerifyBound starts nothing (the fence rule).
func (ls *Leases) admitAgeCap() time.Duration { return ls.cfg.LeaseTTL / 2 }

// raiseAdmitAge makes handler's admitted age at least twice age (capped,
// whole milliseconds; no lower than it was while the record of that one
// lasts) and stored in Redis, its record lasting: it returns once Redis
// answered the store (in the strict mode, once ReplicaAcks replicas
// acknowledged it), so that a confirmation sent afterwards may be judged
// by it. A record stored since the caller's confirmation was sent that
// already covers it is not stored again. An error means the age was not
// raised: the caller must not start an attempt on that confirmation.
func (ls *Leases) raiseAdmitAge(ctx context.Context, handler string, age time.Duration) error {
	a := ls.admitAge(handler)
	select {
	case a.storing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-a.storing }()
	was := a.limit()
	lasts := time.Now().Before(was.until)
	want := 2 * age
	if lasts {
		want = max(want, was.age)
	}
	want = min(want, ls.admitAgeCap())
	want = (want + time.Millisecond - 1).Truncate(time.Millisecond)
	if lasts && was.age >= want {
		return nil
	}
	sent := time.Now()
	// In the strict mode the store must be on ReplicaAcks replicas before
	// the engine relies on it, as every other write an attempt starts
	// after: a failover that lost it would let a Pause on the new primary
	// wait too little.
	if err := rdb.StoreAdmitAgeAcked(ctx, ls.cfg.Client, handler, ls.cfg.Incarnation, want, ls.cfg.LeaseTTL, ls.cfg.ReplicaAcks, ls.cfg.ReplicaTimeout); err != nil {
		return err
	}
	a.mu.Lock()
	a.age, a.until = want, sent.Add(ls.cfg.LeaseTTL-ls.cfg.LeaseMargin)
	a.mu.Unlock()
	if want < was.age {
		ls.cfg.Log.Info("seqby: lowered the admitted confirmation age after its record ended (an operator's Pause waits the higher one out until its end in Redis)",
			"handler", handler, "confirmation_age", age.Round(time.Millisecond), "admitted_age", want, "was", was.age)
	}
	if want > was.age {
		ls.cfg.Log.Warn("seqby: a lease confirmation sent holding a concurrency slot was answered later than this engine admits; raised the admitted confirmation age (an operator's Pause waits it out)",
			"handler", handler, "confirmation_age", age.Round(time.Millisecond), "admitted_age", want, "verify_bound", ls.cfg.VerifyBound)
	}
	return nil
}

// lateConfirmEvery spaces the warnings of confirmations that no admitted
// age can admit, and of raises that failed.
const lateConfirmEvery = 30 * time.Second

// warnLateConfirm reports, at most once per lateConfirmEvery, a
// confirmation sent holding a slot that started no attempt: answered
// later than any admitted age may be (err nil), or the raise of the age
// failed (err).
func (ls *Leases) warnLateConfirm(handler string, age time.Duration, err error) {
	now := time.Now().UnixNano()
	last := ls.lateConfirmAt.Load()
	if now-last < int64(lateConfirmEvery) || !ls.lateConfirmAt.CompareAndSwap(last, now) {
		return
	}
	if err != nil {
		ls.cfg.Log.Warn("seqby: storing a raised admitted confirmation age failed; no attempt starts on a confirmation that late, the gate confirms again after a backoff without its concurrency slot",
			"handler", handler, "confirmation_age", age.Round(time.Millisecond), "verify_bound", ls.cfg.VerifyBound, "err", err)
		return
	}
	ls.cfg.Log.Warn("seqby: a lease confirmation sent holding a concurrency slot was answered later than any admitted confirmation age (LeaseTTL/2); no attempt starts on it, the gate confirms again after a backoff without its slot: Redis answers slower than the leases can be kept",
		"handler", handler, "confirmation_age", age.Round(time.Millisecond), "max_admitted_age", ls.admitAgeCap(), "verify_bound", ls.cfg.VerifyBound)
}
