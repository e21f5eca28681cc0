package membership

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/sleep"
)

// ErrOwnerInUse is ClaimOwner's error when another live engine instance
// holds the same OwnerID; runtime re-exports it.
var ErrOwnerInUse = errors.New("another live engine instance runs with this OwnerID")

// NewIncarnation returns a fresh incarnation of ownerID.
func NewIncarnation(ownerID string) string {
	var b [8]byte
	rand.Read(b[:])
	return ownerID + "~" + hex.EncodeToString(b[:])
}

// ClaimOwner takes the OwnerID's key for this incarnation, waiting out a
// key a dead incarnation left (at most its TTL), and refusing with
// ErrOwnerInUse once the holder is seen renewing it. ctx ending first
// returns ctx's error.
func (in *Instance) ClaimOwner(ctx context.Context) error {
	c, owner := in.cfg.Client, in.cfg.Owner
	var last time.Duration // the holder's TTL at the last look (0: none yet)
	var lastReply time.Time
	for {
		sent := time.Now()
		taken, held, left, err := rdb.ClaimOwner(ctx, c, owner, in.cfg.Incarnation, in.cfg.LeaseTTL)
		if err != nil {
			return err
		}
		if taken {
			return nil
		}
		if left < 0 {
			return fmt.Errorf("%w: OwnerID %q is held by %s with no expiry, which no engine writes: delete %s, or give this process another OwnerID",
				ErrOwnerInUse, owner, held, rdb.OwnerKey(owner))
		}
		// A dead holder's TTL only runs down: at least the time from the
		// last look's reply to this look's send passed in Redis between
		// the two. More left than that (and the TTL's rounding) means the
		// holder renewed it: it lives.
		if last > 0 && left > last-sent.Sub(lastReply)+2*time.Millisecond {
			return fmt.Errorf("%w: OwnerID %q is held by incarnation %s, which renews it: give every process its own OwnerID, or leave it empty for a unique default", ErrOwnerInUse, owner, held)
		}
		if last == 0 {
			in.cfg.Log.Warn("seqby: another incarnation holds this OwnerID; waiting for it to expire (a killed process), or refusing if it is renewed (a live one)",
				"incarnation", held, "expires_in", left)
		}
		last, lastReply = left, time.Now()
		if !sleep.For(ctx, min(in.cfg.HeartbeatInterval, max(left, time.Millisecond))) {
			return ctx.Err()
		}
	}
}

// RenewOwner keeps the OwnerID's key for this incarnation (each
// heartbeat). A key lost (a Redis restart, a failover) is taken again; one
// held by another incarnation is reported loudly: tokens are per
// incarnation, so the two never run one partition at once, but they share
// a name in member sets and halt records.
func (in *Instance) RenewOwner(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, in.cfg.HeartbeatInterval)
	defer cancel()
	c, owner := in.cfg.Client, in.cfg.Owner
	err := rdb.RenewOwner(ctx, c, owner, in.cfg.Incarnation, in.cfg.LeaseTTL)
	if !errors.Is(err, rdb.ErrLeaseLost) {
		return // renewed, or a passing error: the next heartbeat tries again
	}
	taken, held, _, err := rdb.ClaimOwner(ctx, c, owner, in.cfg.Incarnation, in.cfg.LeaseTTL)
	if err == nil && taken {
		in.rerecordDeploy(ctx) // records judged dead meanwhile may be gone
	}
	if err == nil && !taken {
		in.cfg.Log.Error("seqby: another live engine instance runs with this OwnerID; give every process its own OwnerID (keyed partitions stay apart, but unkeyed handlers share one consumer name, and operators cannot tell the two apart)",
			"owner", owner, "other", held)
	}
}

// ReleaseOwner gives the OwnerID's key up as Run returns, and deletes this
// incarnation's signal stream.
func (in *Instance) ReleaseOwner(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.cfg.HeartbeatInterval)
	defer cancel()
	if err := rdb.ReleaseOwner(ctx, in.cfg.Client, in.cfg.Owner, in.cfg.Incarnation); err != nil {
		in.cfg.Log.Debug("seqby: releasing the OwnerID failed; it expires after LeaseTTL", "err", err)
	}
	if err := rdb.DropOwnerSignals(ctx, in.cfg.Client, in.cfg.Incarnation); err != nil {
		in.cfg.Log.Debug("seqby: deleting this instance's signal stream failed; it expires by itself", "err", err, "ttl", rdb.OwnerSignalTTL)
	}
}
