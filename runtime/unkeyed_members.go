package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Unkeyed handlers share consumer groups by message, and a consumer's name
// is its instance's OwnerID. To tell a dead consumer (whose pending
// entries someone must take over, and whose name must leave the group)
// from a live but slow one, every instance running an unkeyed handler
// announces itself in the handler's member set, rdb.MembersKey(handler), the
// set keyed handlers use for fair share: from its own goroutine, so a slow
// handler never makes its instance look dead.

// unkeyedState is one engine's shared state for one unkeyed handler: the
// member announcer and the entries it halted on. It lives while any of the
// handler's workers in that engine runs.
type unkeyedState struct {
	refs   int
	done   chan struct{} // closed when the last worker leaves
	exited chan struct{} // closed when the announcer has left the set

	mu     sync.Mutex
	halted map[string]struct{} // stream + "\x00" + entry id
	order  []string            // halted keys, oldest first, for the bound
	live   map[string]bool     // last live member set read (never mutated)
	liveAt time.Time           // when live was read
}

// maxHaltedIDs bounds the halted entries an instance remembers per
// handler; one evicted is re-run (and alerted) once more if met again.
const maxHaltedIDs = 10000

// joinUnkeyed registers a worker of handler and returns the shared state;
// the first worker announces the instance synchronously (so it counts as
// live before it reads anything) and starts the announcer. Call
// leaveUnkeyed when the worker ends.
func (e *Engine) joinUnkeyed(base context.Context, handler string) *unkeyedState {
	e.unkeyedMu.Lock()
	st := e.unkeyed[handler]
	if st != nil {
		st.refs++
		e.unkeyedMu.Unlock()
		return st
	}
	st = &unkeyedState{refs: 1, done: make(chan struct{}), exited: make(chan struct{}), halted: map[string]struct{}{}}
	if e.unkeyed == nil {
		e.unkeyed = map[string]*unkeyedState{}
	}
	e.unkeyed[handler] = st
	e.unkeyedMu.Unlock()
	e.announceUnkeyed(base, handler, true)
	go e.announceUnkeyedLoop(base, handler, st)
	return st
}

// leaveUnkeyed ends a worker; the last one of the handler stops the
// announcer, which leaves the member set, so another instance may take
// over this consumer's pending entries (its halted ones) at once, and
// delete the consumer.
func (e *Engine) leaveUnkeyed(handler string) {
	e.unkeyedMu.Lock()
	st := e.unkeyed[handler]
	st.refs--
	last := st.refs == 0
	if last {
		delete(e.unkeyed, handler)
	}
	e.unkeyedMu.Unlock()
	if last {
		close(st.done)
		<-st.exited
	}
}

func (e *Engine) announceUnkeyedLoop(base context.Context, handler string, st *unkeyedState) {
	defer close(st.exited)
	t := time.NewTicker(e.o.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-st.done:
			e.announceUnkeyed(base, handler, false)
			return
		case <-t.C:
			e.announceUnkeyed(base, handler, true)
		}
	}
}

// announceUnkeyed joins (or leaves) the handler's member set.
func (e *Engine) announceUnkeyed(base context.Context, handler string, join bool) {
	ctx, cancel := context.WithTimeout(base, max(e.o.HeartbeatInterval, time.Second))
	defer cancel()
	if _, err := rdb.Announce(ctx, e.c, handler, e.o.OwnerID, e.members.MemberTTL(), join); err != nil {
		e.log.Warn("seqby: member announcement failed", "handler", handler, "err", err)
	}
}

// liveMembersCached is rdb.LiveMembers shared by the handler's workers for up
// to a HeartbeatInterval, so many partitions cost one read. Safe: an
// instance joins before its first read, so one whose entry has been idle
// LeaseTTL (> HeartbeatInterval) had joined before the cached read.
func (e *Engine) liveMembersCached(ctx context.Context, st *unkeyedState, handler string) (map[string]bool, error) {
	st.mu.Lock()
	if st.live != nil && time.Since(st.liveAt) < e.o.HeartbeatInterval {
		live := st.live
		st.mu.Unlock()
		return live, nil
	}
	st.mu.Unlock()
	at := time.Now()
	live, err := rdb.LiveMembers(ctx, e.c, handler, e.members.MemberTTL())
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	st.live, st.liveAt = live, at
	st.mu.Unlock()
	return live, nil
}

func haltedKey(stream, id string) string { return stream + "\x00" + id }

// isHalted reports whether this instance already halted on the entry.
func (s *unkeyedState) isHalted(stream, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.halted[haltedKey(stream, id)]
	return ok
}

// markHalted remembers a halted entry, evicting the oldest beyond the bound.
func (s *unkeyedState) markHalted(stream, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := haltedKey(stream, id)
	if _, ok := s.halted[k]; ok {
		return
	}
	s.halted[k] = struct{}{}
	s.order = append(s.order, k)
	if len(s.order) > maxHaltedIDs {
		delete(s.halted, s.order[0])
		s.order = s.order[1:]
	}
}
