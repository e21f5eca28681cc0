package runtime

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// heartbeatLoop renews every owned lease each HeartbeatInterval in one
// pipeline, from its own goroutine, so renewals never wait behind a
// handler. A renew that finds the lease gone cancels the partition at once;
// one that fails on the network leaves the deadline timer to cancel it.
func (e *Engine) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(e.o.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.renewAll(ctx)
		e.announce(ctx)
	}
}

// announce refreshes this instance in the member sets of its keyed
// handlers, so it stays counted while discovery is slow or busy.
func (e *Engine) announce(ctx context.Context) {
	if e.leaving.Load() || len(e.handlers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, e.o.HeartbeatInterval)
	defer cancel()
	for try := 0; try < 2; try++ {
		pipe := e.c.Pipeline()
		for _, h := range e.handlers {
			scriptMember.EvalSha(ctx, pipe, []string{MembersKey(h)}, e.o.OwnerID, e.memberTTL().Milliseconds(), "1")
		}
		_, err := pipe.Exec(ctx)
		if err == nil || e.leaving.Load() {
			return
		}
		if !isNoScript(err) || try > 0 {
			e.log.Debug("seqby: member announcement failed", "err", err)
			return
		}
		// EVALSHA in a pipeline has no EVAL fallback: Redis lost its
		// script cache (restart, SCRIPT FLUSH), so reload and redo.
		if err := LoadScripts(ctx, e.c); err != nil {
			e.log.Warn("seqby: reloading scripts failed; the member announcement retries next heartbeat", "err", err)
			return
		}
	}
}

func (e *Engine) renewAll(ctx context.Context) {
	e.mu.Lock()
	parts := make([]*partition, 0, len(e.parts))
	for _, p := range e.parts {
		if p.ctx.Err() == nil {
			parts = append(parts, p)
		}
	}
	e.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	for try := 0; try < 2; try++ {
		rctx, cancel := context.WithTimeout(ctx, e.o.HeartbeatInterval)
		sent := time.Now()
		pipe := e.c.Pipeline()
		cmds := make([]*redis.Cmd, len(parts))
		for i, p := range parts {
			cmds[i] = scriptRenew.EvalSha(rctx, pipe, []string{p.lease.Ref.Key}, p.lease.Token(), e.o.LeaseTTL.Milliseconds())
		}
		pipe.Exec(rctx)
		cancel()
		noscript := false
		for i, cmd := range cmds {
			n, err := cmd.Int64()
			switch {
			case isNoScript(err):
				noscript = true
			case err != nil:
				e.log.Warn("seqby: lease renew failed; will retry", "stream", parts[i].lanes[0], "err", err)
			case n == 1:
				parts[i].renewed(sent)
			default:
				parts[i].lost(ErrLeaseLost)
			}
		}
		if !noscript {
			return
		}
		// Redis lost its script cache (restart, SCRIPT FLUSH): reload, redo.
		if err := LoadScripts(ctx, e.c); err != nil {
			e.log.Warn("seqby: reloading scripts failed", "err", err)
			return
		}
	}
}
