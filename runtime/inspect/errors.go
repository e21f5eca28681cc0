package inspect

import "errors"

// ErrNotHalted means there is no halt record for the partition: it is not
// halted, or it has already moved past its head.
var ErrNotHalted = errors.New("partition is not halted (no halt record; it may have moved on); list the halted partitions with seqbyctl halted")

// ErrNotHead means the entry is not the halted partition's head (the
// group's first pending entry on the head's stream), so nothing was done:
// the operator never skips another message than the one inspected.
var ErrNotHead = errors.New("entry is not the halted partition's head; inspect the partition again and use the head's id")

// ErrRetrying means an owner is retrying the head right now: the lease is
// held by another owner than the one that halted, or the lease's owner
// (the halting one included) is inside an attempt of the head, which it
// marks in Redis. Skipping under it could run the head and its successor
// at once. Wait until the attempt is over (a halted head is retried every
// HaltedRetryInterval; Halts shows a new record after a new halt) and
// retry: the refusal changes nothing.
var ErrRetrying = errors.New("an owner is retrying the head; wait until the attempt is over and retry")

// ErrUnknownHandler means no engine registered a handler of that name
// with this Redis: a typo (the error suggests the nearest name and lists
// the known ones), or the wrong Redis.
var ErrUnknownHandler = errors.New("unknown handler")

// ErrNoPartition means the name given is not a partition of the handler:
// no partition stream of its categories' indexes, and no halt record. The
// error suggests the nearest partition stream.
var ErrNoPartition = errors.New("no such partition")

// ErrNoDLQ means the stream given is not an existing dead-letter stream
// (category:{key}:dlq); the error suggests the nearest one.
var ErrNoDLQ = errors.New("no such dead-letter stream")

// ErrNoDLQEntry means the dead-letter stream has no entry of that id (it
// was replayed or dropped already); list them with seqbyctl dlq list.
var ErrNoDLQEntry = errors.New("no such dead-letter entry; list them with seqbyctl dlq list")

// ErrNothingToReplay means the dead-letter entry holds no message: the
// head had been deleted from its stream before it was moved, so only the
// dlq_* fields were copied. Drop it.
var ErrNothingToReplay = errors.New("the dead-letter entry holds no message to replay (its head was deleted from its stream before the move); drop it")
