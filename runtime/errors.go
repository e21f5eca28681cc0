package runtime

import (
	"errors"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/publish"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/replicas"
)

// The sentinel errors, grouped by what returns them. Every error the
// runtime returns wraps one of them (or a *KeyError, a *BatchError):
// test with errors.Is or errors.As. Those defined in an internal package
// are the same values, so errors.Is holds either way.

// Errors of connecting and of starting an engine (NewEngine, Run).
var (
	// ErrConnect matches every error Connect returns.
	ErrConnect = errors.New("cannot connect to Redis")
	// ErrEmptyURL is returned, with ErrConnect, by Connect given an empty (or
	// blank) URL: most often an environment variable that is not set.
	ErrEmptyURL = errors.New("empty Redis URL: set it to redis://host:port (or rediss:// for TLS)")
	// ErrUnsupportedClient is NewEngine's refusal of a client type the engine
	// cannot route its calls through (a *redis.Ring).
	ErrUnsupportedClient = errors.New("unsupported Redis client")
	// ErrOptions matches every error NewEngine returns for invalid Options.
	ErrOptions = errors.New("invalid engine options")
	// ErrRunning is returned by Register after Run started, and by a second Run.
	ErrRunning = errors.New("engine already running; register every handler before Run")
	// ErrEvictionPolicy is returned by Run when a server's maxmemory-policy is
	// not noeviction: under any other policy Redis may evict seqby's keys when
	// it fills up (a lease, and two owners process one key; a stream, and its
	// entries are gone). Set maxmemory-policy noeviction (or, for a Redis that
	// never reaches maxmemory, Options.AllowEviction).
	ErrEvictionPolicy = errors.New("redis may evict seqby's keys: set maxmemory-policy to noeviction")
	// ErrReplicas is returned by Run in the strict replication mode
	// (Options.ReplicaAcks) when Redis cannot keep its promise: the server is
	// not a primary, fewer replicas are connected than ReplicaAcks, or a
	// first barrier (a write and WAIT) failed. Attach the missing replicas
	// (the promise needs every replica a failover may promote), or leave the
	// strict mode.
	ErrReplicas = replicas.ErrReplicas
	// ErrOwnerInUse is Run's error when another live engine instance holds
	// the same Options.OwnerID.
	ErrOwnerInUse = membership.ErrOwnerInUse
	// ErrKindChanged is Run's error when a handler runs as another kind
	// (keyed, unkeyed, sequential pm) than a live instance of it does: the two
	// kinds would share the handler's consumer groups with no serialization.
	// Stop (drain) every instance of the old kind first, or give the changed
	// handler a new name.
	ErrKindChanged = membership.ErrKindChanged
	// ErrUpgrade is Run's error when a live engine instance of an earlier
	// seqby release, which keeps its state under the previous Redis key
	// layout, runs a handler this engine registers, as its deploy record
	// shows; the error names those instances. A live instance whose
	// record is gone is not found (docs/upgrading.md says when): stop
	// every engine of the earlier release, then start this one. An engine
	// of the earlier release started beside engines of this one refuses
	// in turn, with its ErrKindChanged.
	ErrUpgrade = membership.ErrUpgrade
)

// Errors of registering handlers.
var (
	// ErrRegistration matches every registration failure.
	ErrRegistration = errors.New("registration failed")
	// ErrCapability means a handler needs a capability its broker does not
	// advertise: run it on a broker that has it (the Redis engine, or the
	// inline broker in unit tests).
	ErrCapability = errors.New("broker lacks a required capability")
	// ErrKeyConflict means two registrations partition one category by
	// different fields. A category has at most one partition key: make every
	// keyed handler of the category use the same key, or drop the key.
	ErrKeyConflict = errors.New("conflicting partition keys for one category")
)

// Errors of publishing.
var (
	// ErrPublish matches failures to publish other than a bad key
	// (ErrInvalidKey) or a bad message.
	ErrPublish = publish.ErrPublish
	// ErrInvalidRecord matches a Record that PublishRecord can never publish
	// for a reason other than its key (which is ErrInvalidKey): an empty or
	// malformed category, type name or message id. Retrying will not help.
	ErrInvalidRecord = publish.ErrInvalidRecord
	// ErrInvalidMessageID matches a WithMessageID id that breaks the text
	// rules of keys.
	ErrInvalidMessageID = publish.ErrInvalidMessageID
	// ErrNotDurable matches a publish (WaitForReplicas) whose message was
	// stored but not acknowledged by the replicas asked for in time.
	ErrNotDurable = rdb.ErrNotReplicated
)

// Outcomes of a handler's attempt: what a handler returns, or what the engine
// makes of it.
var (
	// ErrPermanent matches an error wrapped by Permanent.
	ErrPermanent = contract.ErrPermanent
	// ErrHandlerPanic matches a handler panic, recovered and treated as a
	// handler failure.
	ErrHandlerPanic = contract.ErrHandlerPanic
	// ErrHandlerTimeout is the failure of an attempt that outlived its
	// handler's timeout.
	ErrHandlerTimeout = contract.ErrHandlerTimeout
	// ErrStateConflict means a pm state save expected a version that is no
	// longer the stored one: someone saved in between. Load again, re-apply the
	// message to the fresh state and save again (the engine does this by
	// retrying the message).
	ErrStateConflict = contract.ErrStateConflict
	// ErrRoutedByAnotherBuild is the error of a halt on an entry whose type
	// this build of the handler does not route but another live build of it
	// does (a rolling deploy): the entry is left for that build, which runs it
	// once it takes the partition over (or the entry, for an unkeyed
	// handler). Finish the deploy (or the rollback); do not skip the entry:
	// once no live build routes the type, this build decides again at its
	// next retry (every HaltedRetryInterval).
	ErrRoutedByAnotherBuild = contract.ErrRoutedByAnotherBuild
)

// Errors of leases and of operators' actions on a partition.
var (
	// ErrLeaseLost is the cause of a handler's context cancellation when its
	// partition's lease was lost (context.Cause matches it): a renew found the
	// lease gone or held by another token, or the local lease deadline passed.
	// Stop working on the event: its partition has a new owner, or soon will.
	ErrLeaseLost = rdb.ErrLeaseLost
	// ErrFenced means a write made under a lease found the lease no longer
	// held at this generation: the writer is a stale owner. RedisStateStore.Save
	// returns it when a pm instance's state is saved under a lost lease; a
	// handler that fences its own effects (LeaseFromContext) can return it too.
	ErrFenced = rdb.ErrFenced
	// ErrPaused is what a confirmation returns for a partition an operator
	// paused: no attempt may start under it.
	ErrPaused = rdb.ErrPaused
	// ErrNotHalted means Skip or Retry named a partition that is not halted.
	ErrNotHalted = errors.New("partition is not halted")
)
