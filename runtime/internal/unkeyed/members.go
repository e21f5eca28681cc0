package unkeyed

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

// state is one engine's shared state for one unkeyed handler: the
// member announcer and the entries it halted on. It lives while any of the
// handler's workers in that engine runs.
type state struct {
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

// join registers a worker of handler and returns the shared state; the
// first worker announces the instance synchronously (so it counts as live
// before it reads anything) and starts the announcer. Call leave when the
// worker ends.
func (r *Runner) join(base context.Context, handler string) *state {
	r.membersMu.Lock()
	st := r.members[handler]
	if st != nil {
		st.refs++
		r.membersMu.Unlock()
		return st
	}
	st = &state{refs: 1, done: make(chan struct{}), exited: make(chan struct{}), halted: map[string]struct{}{}}
	r.members[handler] = st
	r.membersMu.Unlock()
	r.announce(base, handler, true)
	go r.announceLoop(base, handler, st)
	return st
}

// leave ends a worker; the last one of the handler stops the announcer,
// which leaves the member set, so another instance may take over this
// consumer's pending entries (its halted ones) at once, and delete the
// consumer.
func (r *Runner) leave(handler string) {
	r.membersMu.Lock()
	st := r.members[handler]
	st.refs--
	last := st.refs == 0
	if last {
		delete(r.members, handler)
	}
	r.membersMu.Unlock()
	if last {
		close(st.done)
		<-st.exited
	}
}

// announceLoop keeps the instance in handler's member set until the last
// worker leaves, then takes it out.
func (r *Runner) announceLoop(base context.Context, handler string, st *state) {
	defer close(st.exited)
	t := time.NewTicker(r.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-st.done:
			r.announce(base, handler, false)
			return
		case <-t.C:
			r.announce(base, handler, true)
		}
	}
}

// announce joins (or leaves) the handler's member set.
func (r *Runner) announce(base context.Context, handler string, join bool) {
	ctx, cancel := context.WithTimeout(base, max(r.cfg.HeartbeatInterval, time.Second))
	defer cancel()
	if _, err := rdb.Announce(ctx, r.cfg.Client, handler, r.cfg.Owner, r.cfg.MemberTTL, join); err != nil {
		r.cfg.Log.Warn("seqby: member announcement failed", "handler", handler, "err", err)
	}
}

// liveMembers is rdb.LiveMembers shared by the handler's workers for up
// to a HeartbeatInterval, so many partitions cost one read. Safe: an
// instance joins before its first read, so one whose entry has been idle
// LeaseTTL (> HeartbeatInterval) had joined before the cached read.
func (r *Runner) liveMembers(ctx context.Context, st *state, handler string) (map[string]bool, error) {
	st.mu.Lock()
	if st.live != nil && time.Since(st.liveAt) < r.cfg.HeartbeatInterval {
		live := st.live
		st.mu.Unlock()
		return live, nil
	}
	st.mu.Unlock()
	at := time.Now()
	live, err := rdb.LiveMembers(ctx, r.cfg.Client, handler, r.cfg.MemberTTL)
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
func (s *state) isHalted(stream, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.halted[haltedKey(stream, id)]
	return ok
}

// markHalted remembers a halted entry, evicting the oldest beyond the bound.
func (s *state) markHalted(stream, id string) {
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
