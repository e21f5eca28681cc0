package membership

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Announce refreshes this instance in the member sets of those of the
// keyed handlers where it makes progress (the health strikes), so it
// stays counted while discovery is slow or busy. Once LeaveMembers has
// begun, it sends nothing more (announceOnce).
func (in *Instance) Announce(ctx context.Context, handlers []string) {
	handlers = in.liveHandlers(handlers)
	if len(handlers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, in.cfg.HeartbeatInterval)
	defer cancel()
	for try := 0; try < 2; try++ {
		sent, err := in.announceOnce(ctx, handlers)
		if !sent || err == nil || in.leaving.Load() {
			return // a failure while stopping is no news
		}
		if !rdb.IsNoScript(err) || try > 0 {
			in.cfg.Log.Debug("seqby: member announcement failed", "err", err)
			return
		}
		// Redis lost its script cache (restart, SCRIPT FLUSH): reload, redo.
		// Not under announceMu, so a graceful stop waits for one round trip
		// at most; the redo checks leaving again.
		if err := rdb.LoadScripts(ctx, in.cfg.Client); err != nil {
			in.cfg.Log.Warn("seqby: reloading scripts failed; the member announcement retries next heartbeat", "err", err)
			return
		}
	}
}

// announceOnce sends one announcement of handlers unless LeaveMembers has
// begun; sent says whether it did. The check and the send hold
// announceMu, which LeaveMembers takes to set leaving: an announcement
// that saw leaving false has landed before LeaveMembers takes the
// instance out, so none puts a stopping instance back in the member sets
// (where it would count as live, deploy record and all, for LeaseTTL).
// The send is bounded by ctx (Announce's HeartbeatInterval) and the
// client's timeouts, so LeaveMembers waits that long at most.
func (in *Instance) announceOnce(ctx context.Context, handlers []string) (sent bool, err error) {
	owned := in.cfg.Owned(handlers) // takes the engine's lock: not under announceMu
	in.announceMu.Lock()
	defer in.announceMu.Unlock()
	if in.leaving.Load() {
		return false, nil
	}
	if in.announceHook != nil {
		in.announceHook()
	}
	return true, rdb.AnnounceAll(ctx, in.cfg.Client, handlers, owned, in.cfg.Owner, in.MemberTTL())
}

// LeaveMembers removes this instance from the member sets of handlers so
// the others' fair share grows at once. It sets leaving under announceMu:
// a heartbeat announcement in flight lands first (announceOnce), and none
// is sent after, so none puts the instance back.
func (in *Instance) LeaveMembers(ctx context.Context, handlers []string) {
	in.announceMu.Lock()
	in.leaving.Store(true)
	in.announceMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, h := range handlers {
		rdb.Announce(ctx, in.cfg.Client, h, in.cfg.Owner, in.MemberTTL(), false)
	}
}
