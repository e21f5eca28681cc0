package lease

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// RenewerConfig is what a Renewer needs beyond its Leases.
type RenewerConfig struct {
	// List returns the Helds the engine's workers run under; those whose
	// context ended are not renewed.
	List func() []*Held
	// PermanentErrors is how many renewals of a lease refused with a
	// permanent error in a row make it hand over (Hooks.OnRefused):
	// runtime.PermanentRedisErrors.
	PermanentErrors int
}

// Renewer renews every lease the engine's workers hold, in one call per
// heartbeat, from the heartbeat's goroutine, so renewals never wait
// behind a handler. A renew that finds the lease gone cancels its Held
// at once; one that fails on the network leaves the deadline timer to
// cancel it.
type Renewer struct {
	ls  *Leases
	cfg RenewerConfig
	// ok is when the last renewal that succeeded was sent (unix
	// nanoseconds; 0: none yet), for Health.
	ok atomic.Int64
}

// NewRenewer returns the Renewer of ls's leases.
func NewRenewer(ls *Leases, cfg RenewerConfig) *Renewer { return &Renewer{ls: ls, cfg: cfg} }

// RenewedAt is when the last renewal that succeeded was sent (a heartbeat
// with none to renew counts); zero before the first.
func (r *Renewer) RenewedAt() time.Time {
	if n := r.ok.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// renewedAt records a renewal sent at sent whose results are errs: a
// success unless some lease failed for another reason than being lost (a
// lost lease is the partition's fate, not the instance's health).
func (r *Renewer) renewedAt(sent time.Time, errs []error) {
	for _, err := range errs {
		if err != nil && !errors.Is(err, rdb.ErrLeaseLost) {
			return
		}
	}
	r.ok.Store(sent.UnixNano())
}

// renewFailure is one handler's leases whose renew failed in a heartbeat
// (but for being lost or refused): a Redis outage fails them all at once,
// and one line per handler says so (n leases, the first one's stream and
// error) where one per lease would repeat it for every partition, every
// heartbeat, until the leases are lost.
type renewFailure struct {
	n      int
	stream string
	err    error
}

// Renew renews every listed lease in one call, with the attempt marks of
// the halted heads being retried.
func (r *Renewer) Renew(ctx context.Context) {
	cfg := &r.ls.cfg
	var parts []*Held
	for _, h := range r.cfg.List() {
		if h.ctx.Err() == nil {
			parts = append(parts, h)
		}
	}
	if len(parts) == 0 {
		r.ok.Store(time.Now().UnixNano())
		return
	}
	leases, marked := make([]rdb.Lease, len(parts)), make([]bool, len(parts))
	for i, h := range parts {
		leases[i], marked[i] = h.lease, h.marked.Load()
	}
	for try := 0; try < 2; try++ {
		rctx, cancel := context.WithTimeout(ctx, cfg.HeartbeatInterval)
		sent := time.Now()
		errs, named := rdb.RenewAll(rctx, cfg.Client, leases, marked, cfg.LeaseTTL)
		answered := time.Now()
		cancel()
		cfg.Telemetry.RenewDuration(ctx, time.Since(sent))
		errs = errs[:len(parts)]
		r.renewedAt(sent, errs)
		noscript := false
		failed := map[string]*renewFailure{} // by handler: one line each, not one per lease
		var confirm []*Held                  // renewed, for the strict mode's barrier
		for i, err := range errs {
			h := parts[i]
			switch {
			case err == nil:
				h.renewErrs = 0
				// A stream the renewal named this owner in, which it did
				// not know named, wakes the worker once.
				h.renewedNamed(named[i])
				if !marked[i] && h.marked.Load() {
					// An attempt of the halted head began while the call
					// was on its way: its mark may not have moved with the
					// lease, so the local deadline does not either; the
					// next heartbeat renews both.
					break
				}
				if cfg.Replicas != nil {
					confirm = append(confirm, h)
				} else {
					h.Renewed(sent)
				}
			case rdb.IsNoScript(err):
				noscript = true
			case errors.Is(err, rdb.ErrLeaseLost):
				h.Lost(err)
			case rdb.Permanent(err):
				// Renewing cannot succeed (an ACL rule, a key holding
				// something else): after PermanentErrors, hand over at
				// the next boundary and bench the partition, rather than
				// lose the lease each TTL and claim it again (retryable).
				h.renewErrs++
				cfg.Log.Warn("seqby: lease renew refused", "handler", h.id.Handler, "stream", h.id.Stream, "errors", h.renewErrs, "err", err)
				if h.renewErrs >= r.cfg.PermanentErrors && h.hooks.OnRefused != nil {
					h.hooks.OnRefused(err)
				}
			default:
				f := failed[h.id.Handler]
				if f == nil {
					f = &renewFailure{stream: h.id.Stream, err: err}
					failed[h.id.Handler] = f
				}
				f.n++
			}
		}
		if len(confirm) > 0 {
			keys := make([]string, len(confirm))
			for i, h := range confirm {
				keys[i] = h.lease.Ref.Key
			}
			cfg.Replicas.ConfirmRenewals(ctx, keys, sent, answered, cfg.LeaseTTL, func(i int) { confirm[i].Renewed(sent) })
		}
		for _, handler := range slices.Sorted(maps.Keys(failed)) {
			f := failed[handler]
			cfg.Log.Warn("seqby: lease renew failed; will retry", "handler", handler, "failed", f.n,
				"stream", f.stream, "err", f.err)
		}
		if !noscript {
			return
		}
		// Redis lost its script cache (restart, SCRIPT FLUSH): reload, redo.
		if err := rdb.LoadScripts(ctx, cfg.Client); err != nil {
			cfg.Log.Warn("seqby: reloading scripts failed", "err", err)
			return
		}
	}
}
