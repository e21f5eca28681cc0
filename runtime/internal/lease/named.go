package lease

import (
	"errors"
	"slices"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A publish wakes the owners named in its partition's wake hash
// (rdb.WakeKey), and an acquire names its owner only where the stream
// exists: a sequential pm takes a correlation value before some of its
// categories have a stream for it. Once such a stream exists and another
// handler's owner is named in its hash, a publish to it signals that owner
// alone, and the pm would find the entry at its safety-net re-read. So
// each Held remembers, per stream of its lease (rdb.LeaseRef.Wake),
// whether the hash is known to name it (named), and:
//   - at its worker's first read of an entry of a stream not known named,
//     it names itself there (rdb.Lease.Name) before the entry is handled
//     (NameIf), so a publish after that wakes it;
//   - a renewal that finds the owner named where it was not known named
//     (Renewer: the stream appeared, and the renewal named it) tells it
//     too.
// Either way the worker then wakes once (wake.Waiter.Poke): a publish
// between the stream's creation and the naming may have signalled the
// other owners only, and a read that ended before the naming may have
// missed it.

// initNamed sets what h knows named from its lease's acquire.
func (h *Held) initNamed() {
	h.named = make([]bool, len(h.lease.Ref.Wake))
	copy(h.named, h.lease.Named)
}

// wakeCategory is the category of stream j of h's lease.
func (h *Held) wakeCategory(j int) string { return h.id.Cats[j] }

// NameIf names the owner in the wake hash of en's stream when that is a
// partition stream of the lease the owner does not know names it. A
// failure is logged and left to the next entry of the stream, or to the
// next renewal; a fenced one ends the partition.
func (h *Held) NameIf(en rdb.Entry) {
	j := slices.Index(h.lease.Ref.Wake, en.Stream)
	if j < 0 {
		return // a backfill lane: its publishes read its partition stream's hash
	}
	h.mu.Lock()
	known := h.named[j]
	h.mu.Unlock()
	if known {
		return
	}
	named, err := h.lease.Name(h.ctx, h.ls.cfg.Client, []string{en.Stream})
	if err != nil {
		if errors.Is(err, rdb.ErrFenced) {
			h.Lost(err)
			return
		}
		h.ls.cfg.Log.Debug("seqby: naming the owner in a partition's wake hash failed; its next entry or renewal names it",
			"handler", h.id.Handler, "stream", en.Stream, "err", err)
		return
	}
	h.knowNamed([]int{j}, named)
}

// knowNamed records that streams js of h's lease are (named[i]) or are
// not named in their wake hashes, as a call that named the owner where
// each exists replied, and wakes the worker once for each stream newly
// named.
func (h *Held) knowNamed(js []int, named []bool) {
	var pokes []string
	h.mu.Lock()
	for i, j := range js {
		if named[i] && !h.named[j] {
			pokes = append(pokes, h.wakeCategory(j))
		}
		h.named[j] = named[i]
	}
	h.mu.Unlock()
	for _, cat := range pokes {
		h.ls.cfg.Wake.Poke(cat, h.id.Key)
	}
}

// renewedNamed is knowNamed for a renewal's reply on every stream of h's
// lease (nil: not known).
func (h *Held) renewedNamed(named []bool) {
	if len(named) != len(h.lease.Ref.Wake) {
		return
	}
	js := make([]int, len(named))
	for j := range js {
		js[j] = j
	}
	h.knowNamed(js, named)
}
