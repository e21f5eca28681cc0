// Package unkeyed runs the engine's unkeyed handlers. They promise no
// order, so they need no lease: instances share one consumer group per
// stream and Redis balances by message. The consumer name is the
// instance's OwnerID, and instances announce themselves in the handler's
// member set (rdb.MembersKey), so:
//   - entries pending on a consumer that is not live, for at least
//     LeaseTTL, are claimed by a live one; a live but slow consumer keeps
//     its in-flight entry;
//   - a consumer that is not live and has nothing pending is deleted, so
//     the group does not collect one consumer per process start;
//   - a message whose retries are exhausted stays pending on its consumer
//     and the worker moves on: it is alerted once and never re-run by the
//     instance that halted on it, only by another one after that instance
//     is gone.
//
// An unpartitioned category is read by one plain worker (RunPlain); a
// partitioned one by a worker per partition (Fans), woken by the
// wake.Waiter. Every entry runs through the executor under its Slots.
//
// It sits under the engine (package runtime) and must not import it. What
// it needs of the engine (the partition index, the key rules, retention,
// OnHalt) comes in Config as values and callbacks (the executor counts
// each settled outcome, Executor.Settled); the
// halts it keeps for Status are contract.Halt, which runtime converts.
package unkeyed
