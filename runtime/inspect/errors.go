package inspect

import "errors"

// ErrNotHalted means there is no halt record for the partition: it is not
// halted, or it has already moved past its head.
var ErrNotHalted = errors.New("partition is not halted (no halt record; it may have moved on); list the halted partitions with seqbyctl halted")

// ErrNotHead means the entry is not the halted partition's head (the
// group's first pending entry on the head's stream), so nothing was done:
// the operator never skips another message than the one inspected.
var ErrNotHead = errors.New("entry is not the halted partition's head; inspect the partition again and use the head's id")

// ErrRetrying means the lease is held by another owner than the one that
// halted: that owner is retrying the head right now, and skipping under it
// could run the head and its successor at once. Wait until it halts again
// (Halts shows the new record) and retry.
var ErrRetrying = errors.New("an owner is retrying the head; wait until it halts again and retry")
