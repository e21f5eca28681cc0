package runtime

import (
	"errors"
	"slices"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A publish wakes the owners named in its partition's wake hash
// (rdb/wake.go), and an acquire names its owner only where the stream
// exists: a sequential pm takes a correlation value before some of its
// categories have a stream for it. Once such a stream exists and another
// handler's owner is named in its hash, a publish to it signals that owner
// alone, and the pm would find the entry at its safety-net re-read. So
// each partition remembers, per stream of its lease (rdb.LeaseRef.Wake),
// whether the hash is known to name it (named), and:
//   - at its first read of an entry of a stream not known named, it names
//     itself there (rdb.Lease.Name) before it handles the entry, so a
//     publish after that wakes it;
//   - a renewal that finds the owner named where it was not known named
//     (heartbeat.go: the stream appeared, and the renewal named it)
//     tells it too.
// Either way the partition then wakes once (wake.Waiter.Poke): a publish
// between the stream's creation and the naming may have signalled the
// other owners only, and a read that ended before the naming may have
// missed it.

// initNamed sets what p knows named from its lease's acquire.
func (p *partition) initNamed() {
	p.named = make([]bool, len(p.lease.Ref.Wake))
	copy(p.named, p.lease.Named)
}

// wakeCategory is the category of stream j of p's lease.
func (p *partition) wakeCategory(j int) string {
	if p.cats != nil {
		return p.cats[j]
	}
	return p.category
}

// nameIf names the owner in the wake hash of en's stream when that is a
// partition stream of the lease the owner does not know names it. A
// failure is logged and left to the next entry of the stream, or to the
// next renewal; a fenced one ends the partition.
func (p *partition) nameIf(en rdb.Entry) {
	j := slices.Index(p.lease.Ref.Wake, en.Stream)
	if j < 0 {
		return // a backfill lane: its publishes read its partition stream's hash
	}
	p.mu.Lock()
	known := p.named[j]
	p.mu.Unlock()
	if known {
		return
	}
	named, err := p.lease.Name(p.ctx, p.e.c, []string{en.Stream})
	if err != nil {
		if errors.Is(err, ErrFenced) {
			p.lost(err)
			return
		}
		p.e.log.Debug("seqby: naming the owner in a partition's wake hash failed; its next entry or renewal names it",
			"handler", p.reg.Name, "stream", en.Stream, "err", err)
		return
	}
	p.knowNamed([]int{j}, named)
}

// knowNamed records that streams js of p's lease are (named[i]) or are
// not named in their wake hashes, as a call that named the owner where
// each exists replied, and wakes p once for each stream newly named.
func (p *partition) knowNamed(js []int, named []bool) {
	var pokes []string
	p.mu.Lock()
	for i, j := range js {
		if named[i] && !p.named[j] {
			pokes = append(pokes, p.wakeCategory(j))
		}
		p.named[j] = named[i]
	}
	p.mu.Unlock()
	for _, cat := range pokes {
		p.e.wake.Poke(cat, p.key)
	}
}

// renewedNamed is knowNamed for a renewal's reply on every stream of p's
// lease (nil: not known).
func (p *partition) renewedNamed(named []bool) {
	if len(named) != len(p.lease.Ref.Wake) {
		return
	}
	js := make([]int, len(named))
	for j := range js {
		js[j] = j
	}
	p.knowNamed(js, named)
}
