package runtime

import "github.com/seqby/seqby/runtime/internal/rdb"

// ErrLeaseLost is the cause of a handler's context cancellation when its
// partition's lease was lost (context.Cause matches it): a renew found the
// lease gone or held by another token, or the local lease deadline passed.
// Stop working on the event: its partition has a new owner, or soon will.
var ErrLeaseLost = rdb.ErrLeaseLost

// ErrFenced means a write made under a lease found the lease no longer
// held at this generation: the writer is a stale owner. RedisStateStore.Save
// returns it when a pm instance's state is saved under a lost lease; a
// handler that fences its own effects (LeaseFromContext) can return it too.
var ErrFenced = rdb.ErrFenced
