package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Engine identity. OwnerID names an instance for operators (halt
// records, member sets, Status), but two processes can be given the same
// one: a fixed "w1" in a config, a hostname or pod name, a restarted
// incarnation while the old one is only stalled. So a lease's token never
// rests on OwnerID alone:
//
//   - every engine draws an incarnation at NewEngine, "<OwnerID>~<random
//     hex>", the owner part of every lease token and consumer name of a
//     keyed partition it creates, so two processes never hold one token,
//     and a resumed stale incarnation's token fails every fence;
//   - adoption (adopt.go) takes back only leases of this incarnation;
//   - Run takes the OwnerID's key (rdb.OwnerKey) before anything else and
//     the heartbeat renews it: a second live process with the same OwnerID
//     is refused at start with ErrOwnerInUse. A key left by a killed
//     incarnation only shrinks toward its end (LeaseTTL), so Run waits for
//     it, and refuses as soon as it sees the key renewed (a live holder).

// ErrOwnerInUse is Run's error when another live engine instance holds
// the same Options.OwnerID.
var ErrOwnerInUse = errors.New("another live engine instance runs with this OwnerID")

// newIncarnation returns a fresh incarnation of ownerID.
func newIncarnation(ownerID string) string {
	var b [8]byte
	rand.Read(b[:])
	return ownerID + "~" + hex.EncodeToString(b[:])
}

// claimOwner takes the OwnerID's key for e.incarnation, waiting out a key
// a dead incarnation left (at most its TTL), and refusing with
// ErrOwnerInUse once the holder is seen renewing it. ctx ending first
// returns ctx's error.
func (e *Engine) claimOwner(ctx context.Context) error {
	var last time.Duration // the holder's TTL at the last look (0: none yet)
	var lastReply time.Time
	for {
		sent := time.Now()
		taken, held, left, err := rdb.ClaimOwner(ctx, e.c, e.o.OwnerID, e.incarnation, e.o.LeaseTTL)
		if err != nil {
			return err
		}
		if taken {
			return nil
		}
		if left < 0 {
			return fmt.Errorf("%w: OwnerID %q is held by %s with no expiry, which no engine writes: delete %s, or give this process another OwnerID",
				ErrOwnerInUse, e.o.OwnerID, held, rdb.OwnerKey(e.o.OwnerID))
		}
		// A dead holder's TTL only runs down: at least the time from the
		// last look's reply to this look's send passed in Redis between
		// the two. More left than that (and the TTL's rounding) means the
		// holder renewed it: it lives.
		if last > 0 && left > last-sent.Sub(lastReply)+2*time.Millisecond {
			return fmt.Errorf("%w: OwnerID %q is held by incarnation %s, which renews it: give every process its own OwnerID, or leave it empty for a unique default", ErrOwnerInUse, e.o.OwnerID, held)
		}
		if last == 0 {
			e.log.Warn("seqby: another incarnation holds this OwnerID; waiting for it to expire (a killed process), or refusing if it is renewed (a live one)",
				"incarnation", held, "expires_in", left)
		}
		last, lastReply = left, time.Now()
		if !sleepCtx(ctx, min(e.o.HeartbeatInterval, max(left, time.Millisecond))) {
			return ctx.Err()
		}
	}
}

// renewOwner keeps the OwnerID's key for this incarnation (each
// heartbeat). A key lost (a Redis restart, a failover) is taken again; one
// held by another incarnation is reported loudly: tokens are per
// incarnation, so the two never run one partition at once, but they share
// a name in member sets and halt records.
func (e *Engine) renewOwner(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, e.o.HeartbeatInterval)
	defer cancel()
	err := rdb.RenewOwner(ctx, e.c, e.o.OwnerID, e.incarnation, e.o.LeaseTTL)
	if !errors.Is(err, ErrLeaseLost) {
		return // renewed, or a passing error: the next heartbeat tries again
	}
	taken, held, _, err := rdb.ClaimOwner(ctx, e.c, e.o.OwnerID, e.incarnation, e.o.LeaseTTL)
	if err == nil && taken {
		e.rerecordDeploy(ctx) // records judged dead meanwhile may be gone
	}
	if err == nil && !taken {
		e.log.Error("seqby: another live engine instance runs with this OwnerID; give every process its own OwnerID (keyed partitions stay apart, but unkeyed handlers share one consumer name, and operators cannot tell the two apart)",
			"owner", e.o.OwnerID, "other", held)
	}
}

// releaseOwner gives the OwnerID's key up as Run returns.
func (e *Engine) releaseOwner(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.o.HeartbeatInterval)
	defer cancel()
	if err := rdb.ReleaseOwner(ctx, e.c, e.o.OwnerID, e.incarnation); err != nil {
		e.log.Debug("seqby: releasing the OwnerID failed; it expires after LeaseTTL", "err", err)
	}
	if err := rdb.DropOwnerSignals(ctx, e.c, e.incarnation); err != nil {
		e.log.Debug("seqby: deleting this instance's signal stream failed; it expires by itself", "err", err, "ttl", rdb.OwnerSignalTTL)
	}
}
