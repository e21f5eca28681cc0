// Package replicas is the strict replication mode (Options.ReplicaAcks):
// the barriers that confirm writes on replicas, per hash slot on a Redis
// Cluster, and Run's look at replication (Check). The engine keeps one
// Barrier (nil in the default mode) and asks it before an attempt, before
// an ack and before a renewal moves a lease's deadline.
package replicas

import "errors"

// ErrReplicas is returned by Run in the strict replication mode
// (Options.ReplicaAcks) when Redis cannot keep its promise: the server is
// not a primary, fewer replicas are connected than ReplicaAcks, or a
// first barrier (a write and WAIT) failed. Attach the missing replicas
// (the promise needs every replica a failover may promote), or leave the
// strict mode.
var ErrReplicas = errors.New("redis cannot keep the strict replication mode's promise")

// ErrPrimaryChanged ends a partition whose writes since its last barrier
// may have gone to a primary that a failover replaced: they may be lost,
// so the partition is claimed afresh and reads what the new primary has.
var ErrPrimaryChanged = errors.New("the Redis primary changed after the partition's last write confirmed on replicas; what it wrote since may be lost, so it is claimed afresh")

// ErrGaveUp ends a partition asked to hand over or stop whose replicas did
// not acknowledge within the release grace.
var ErrGaveUp = errors.New("replicas did not acknowledge before the partition had to be released")
