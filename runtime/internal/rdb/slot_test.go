package rdb

import "testing"

// Each slot's barrier key hashes to that slot, so a barrier's write of it
// runs on the node that serves the slot (or is refused with MOVED).
func TestSlotBarrierKeyHashesToItsSlot(t *testing.T) {
	seen := map[string]bool{}
	for s := range slotCount {
		k := SlotBarrierKey(s)
		if got := Slot(k); got != s {
			t.Fatalf("SlotBarrierKey(%d) = %q hashes to slot %d", s, k, got)
		}
		if seen[k] {
			t.Fatalf("SlotBarrierKey(%d) = %q again", s, k)
		}
		seen[k] = true
	}
}
