package discovery

// moveBatch bounds the partitions one discovery cycle hands over to move
// them to generation groups: each waits for a message boundary and an
// acquire, so a large instance moves its partitions over several cycles
// rather than stopping all of them at once.
const moveBatch = 64

// moveGroups moves this instance's partitions of handler that still read
// through the handler's shared consumer group (an acquire made while an
// instance of the build before it was live, docs/upgrading.md) to their
// lease generation's group, once the handler's acquires may move lanes
// (membership.Instance.GenGroups): it hands up to moveBatch of them over
// at their next message boundary, and the next acquire, most likely this
// instance's own as it is now below its share, moves the lanes whole
// (pending entries, delivery counts, position). Halted partitions stay
// (a handover runs the head once more): they move when they change hands
// anyway (a handover above the fair share, a restart) or an operator's
// skip or DLQ move ends their lease.
func (d *Discovery) moveGroups(handler string) {
	n := 0
	defer func() {
		if n > 0 {
			d.cfg.Log.Info("seqby: handing partitions over to move them to their lease generation's consumer group", "handler", handler, "handing_over", n)
		}
	}()
	for _, w := range d.cfg.Workers.Mine(handler) {
		if n == moveBatch {
			return
		}
		if w.Held().Lease().GenGroups || w.Halted() || !w.Holding() {
			continue
		}
		d.cfg.Log.Debug("seqby: handing over to move to the generation's consumer group", "handler", handler, "partition", w.Key(), "stream", w.Stream())
		w.RequestRelease()
		n++
	}
}
