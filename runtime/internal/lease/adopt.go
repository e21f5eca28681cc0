package lease

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Adopt takes back a lease that Redis holds under this incarnation's
// token but that no worker of it runs: granted to an acquire whose reply
// was lost (the cycle's deadline, a dropped connection; go-redis may also
// send a command or a cluster pipeline again by itself, and the second
// run finds the first one's lease), or left by a release that failed.
// Without it the partition would wait a whole LeaseTTL for the orphan to
// expire. Only a token of this incarnation (membership.NewIncarnation),
// never one of another process given the same OwnerID, is adopted, and
// the caller found no worker of this instance on the unit, so the lease
// is this instance's to run. A renew (compare-and-set on the exact token)
// confirms it and restarts its TTL, sent at *sent.
func (ls *Leases) Adopt(ctx context.Context, ref rdb.LeaseRef, err error, sent *time.Time) (rdb.Lease, bool) {
	var held *rdb.HeldError
	if !errors.As(err, &held) {
		return rdb.Lease{}, false
	}
	owner, gen, perr := rdb.ParseIncarnation(held.Token)
	if perr != nil || owner != ls.cfg.Incarnation {
		return rdb.Lease{}, false
	}
	l := rdb.Lease{Ref: ref, Owner: owner, Generation: gen, GenGroups: held.GenGroups}
	*sent = time.Now()
	if err := l.Renew(ctx, ls.cfg.Client, ls.cfg.LeaseTTL); err != nil {
		return rdb.Lease{}, false
	}
	return l, true
}
