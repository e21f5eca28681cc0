package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// adopt takes back a lease that Redis granted to this instance but that
// no worker of it runs: an acquire whose reply was lost (the cycle's
// deadline, a dropped connection). Without it the partition would wait a
// whole LeaseTTL for the orphan to expire. Only a unit whose acquire was
// lost lately (lostAcquire) is adopted, and only from this OwnerID, so
// two processes misconfigured with one OwnerID do not both run it; claim
// found no worker of this instance on the unit, so the lease is this
// instance's to run. A renew (compare-and-set on the exact token) confirms
// it and restarts its TTL, sent at *sent.
func (e *Engine) adopt(ctx context.Context, id string, ref rdb.LeaseRef, err error, sent *time.Time) (rdb.Lease, bool) {
	var held *rdb.HeldError
	if !errors.As(err, &held) || !e.takeLostAcquire(id) {
		return rdb.Lease{}, false
	}
	owner, gen, perr := rdb.ParseToken(held.Token)
	if perr != nil || owner != e.o.OwnerID {
		return rdb.Lease{}, false
	}
	l := rdb.Lease{Ref: ref, Owner: owner, Generation: gen}
	*sent = time.Now()
	if err := l.Renew(ctx, e.c, e.o.LeaseTTL); err != nil {
		return rdb.Lease{}, false
	}
	e.log.Info("seqby: adopting this instance's own lease, granted to an acquire whose reply was lost", "lease", ref.Key, "token", held.Token)
	return l, true
}

// lostAcquire records that an acquire of unit id failed in a way that may
// have been granted in Redis (a deadline, the network): not a refusal.
func (e *Engine) lostAcquire(id string, err error) {
	if rdb.Permanent(err) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for k, at := range e.lost { // bounded: a lost lease expires after LeaseTTL
		if now.Sub(at) > e.o.LeaseTTL {
			delete(e.lost, k)
		}
	}
	e.lost[id] = now
}

// takeLostAcquire reports, and forgets, a lost acquire of id younger
// than LeaseTTL.
func (e *Engine) takeLostAcquire(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.lost[id]
	delete(e.lost, id)
	return ok && time.Since(at) <= e.o.LeaseTTL
}
