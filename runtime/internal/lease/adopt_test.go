package lease

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Finding 4: adoption takes back only this incarnation's leases, never one
// of another process with the same OwnerID (whose token names that OwnerID
// too), even when the OwnerID's key was lost and both run.
func TestAdoptOnlyThisIncarnation(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	other := newLeases(t, c, "w1", time.Second, nil)
	ls := newLeases(t, c, "w1", time.Second, nil)
	for _, owner := range []*Leases{other, ls} {
		ref := rdb.PartitionLease(rdb.PartitionStream("order", fmt.Sprintf("k-%p", owner)), "h")
		l, err := rdb.Acquire(ctx, c, ref, other.cfg.Incarnation, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held := &rdb.HeldError{Key: ref.Key, Token: l.Token()}
		var sent time.Time
		_, adopted := owner.Adopt(ctx, ref, held, &sent)
		if want := owner == other; adopted != want {
			t.Errorf("adopt of %s by incarnation %s: %v, want %v", l.Token(), owner.cfg.Incarnation, adopted, want)
		}
	}
	if inc := ls.cfg.Incarnation; !strings.HasPrefix(inc, "w1~") || inc == other.cfg.Incarnation {
		t.Fatalf("incarnations %q and %q: want distinct, each w1~<random>", inc, other.cfg.Incarnation)
	}
}
