package unkeyed

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// worker reads one unkeyed handler's lanes: a plain worker the stream of
// an unpartitioned category, a fan one partition's lanes.
type worker struct {
	r        *Runner
	base     context.Context
	stop     <-chan struct{}
	handler  string // also the group's name
	category string
	st       *state
	key      string // the partition's key; "" for a plain worker
	lanes    []string
	trims    Trimmer // acks since the lanes were last trimmed
}

// RunPlain consumes an unpartitioned category's stream {category} in
// handler's group until stop closes.
func (r *Runner) RunPlain(base context.Context, stop <-chan struct{}, handler, category string) {
	stream, group := category, handler
	for !r.ensureGroup(base, stream, group, true) {
		if !sleepOr(stop, r.cfg.RetryBackoff) {
			return
		}
	}
	st := r.join(base, group)
	defer r.leave(group)
	u := r.newWorker(base, stop, handler, category, "", []string{stream})
	u.st = st
	u.drainPending()
	lastClaim := time.Now()
	backoff := r.cfg.RetryBackoff
	for {
		select {
		case <-stop:
			return
		default:
		}
		// One stream per worker: checking for dead consumers each
		// discovery cycle is cheap and bounds takeover near LeaseTTL.
		if time.Since(lastClaim) > r.cfg.DiscoveryInterval {
			u.claimStale()
			lastClaim = time.Now()
		}
		ctx, cancel := context.WithTimeout(base, r.cfg.BlockTimeout+5*time.Second)
		ens, err := rdb.ReadGroup(ctx, r.cfg.Client, stream, group, r.cfg.Owner, ">", 1, r.cfg.BlockTimeout)
		cancel()
		if err != nil {
			if rdb.IsNoGroup(err) {
				r.ensureGroup(base, stream, group, true)
				continue
			}
			r.cfg.Log.Warn("seqby: read failed; retrying", "handler", group, "stream", stream, "err", err)
			if !sleepOr(stop, backoff) {
				return
			}
			backoff = min(2*backoff, r.cfg.MaxBackoff)
			continue
		}
		if len(ens) == 0 {
			u.trims.TrimIf(u.base, true)
			continue
		}
		backoff = r.cfg.RetryBackoff
		for _, en := range ens {
			u.process(en)
		}
		u.trims.TrimIf(u.base, false)
	}
}

// newWorker returns a worker of handler on lanes, all of category, with
// its retention; the caller joins the member state.
func (r *Runner) newWorker(base context.Context, stop <-chan struct{}, handler, category, key string, lanes []string) *worker {
	cats := make([]string, len(lanes))
	for i := range cats {
		cats[i] = category
	}
	return &worker{r: r, base: base, stop: stop, handler: handler, category: category, key: key, lanes: lanes,
		trims: r.cfg.Trims(handler, cats, lanes)}
}

// ensureGroup creates group on stream from id 0 (with MKSTREAM when mk);
// false when the group does not exist (a lane without entries yet, or a
// failure, logged).
func (r *Runner) ensureGroup(base context.Context, stream, group string, mk bool) bool {
	ok, err := r.createGroup(base, stream, group, mk)
	if err != nil {
		r.cfg.Log.Warn("seqby: creating consumer group failed", "handler", group, "stream", stream, "err", err)
	}
	return ok
}

// createGroup creates group on stream from id 0 (with MKSTREAM when mk).
// It reports whether the group exists now; without mk, a stream that does
// not exist yet is (false, nil): the group is created when it does.
func (r *Runner) createGroup(base context.Context, stream, group string, mk bool) (bool, error) {
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	return rdb.CreateGroup(ctx, r.cfg.Client, stream, group, mk)
}

// sleepOr waits d unless stop closes first; false when stopped.
func sleepOr(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}
