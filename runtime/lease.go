package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrLeaseHeld means another owner holds the lease; try again after it
// expires or is released.
var ErrLeaseHeld = errors.New("lease is held by another owner")

// ErrLeaseLost means a renew found the lease gone or held by another
// token: the owner must stop working on what the lease covered.
var ErrLeaseLost = errors.New("lease lost; stop processing the partition and let its new owner continue")

// ErrFenced is returned by a read or ack whose lease token no longer holds.
// The caller is a stale owner: it must abandon the partition and never read
// or ack it again under that generation.
var ErrFenced = errors.New("fenced: the lease is no longer held at this generation; abandon the partition")

// LeaseRef names one lease: its key and its generation counter. A lease is
// per partition and per consumer group; nothing here assumes it covers a
// single stream, so a later owner of several streams (a process manager's
// correlation value) can reuse it.
type LeaseRef struct {
	Key        string // holds "{owner_id}:{generation}" while owned
	Generation string // counter that never goes backwards
}

// PartitionLease returns the LeaseRef of group's lease on a stream.
func PartitionLease(stream, group string) LeaseRef {
	return LeaseRef{Key: LeaseKey(stream, group), Generation: GenerationKey(stream, group)}
}

// Lease is a held lease, the fencing token of its owner. Like an etcd
// concurrency.Mutex revision, the generation strictly increases each time
// the lease is acquired afresh.
type Lease struct {
	Ref        LeaseRef
	Owner      string
	Generation int64
}

// Token is "{owner_id}:{generation}": the value of the lease key and the
// owner's consumer name in the group.
func (l Lease) Token() string { return l.Owner + ":" + strconv.FormatInt(l.Generation, 10) }

// AcquireLease takes ref for owner with a TTL (SET NX PX in one script with
// the generation INCR). It returns ErrLeaseHeld when another token holds it.
func AcquireLease(ctx context.Context, c redis.UniversalClient, ref LeaseRef, owner string, ttl time.Duration) (Lease, error) {
	res, err := scriptAcquire.Run(ctx, c, []string{ref.Key, ref.Generation}, owner, ttl.Milliseconds()).Slice()
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease %s: %w", ref.Key, err)
	}
	if len(res) != 2 {
		return Lease{}, fmt.Errorf("acquire lease %s: unexpected reply %v", ref.Key, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return Lease{}, fmt.Errorf("acquire lease %s (held by %v): %w", ref.Key, res[1], ErrLeaseHeld)
	}
	gen, _ := res[1].(int64)
	return Lease{Ref: ref, Owner: owner, Generation: gen}, nil
}

// Renew extends the lease by ttl if it still holds exactly this token.
func (l Lease) Renew(ctx context.Context, c redis.UniversalClient, ttl time.Duration) error {
	n, err := scriptRenew.Run(ctx, c, []string{l.Ref.Key}, l.Token(), ttl.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", l.Ref.Key, err)
	}
	if n != 1 {
		return fmt.Errorf("renew lease %s as %s: %w", l.Ref.Key, l.Token(), ErrLeaseLost)
	}
	return nil
}

// Release deletes the lease if it still holds this token, so the next
// owner need not wait for the TTL. Releasing a lost lease is not an error.
func (l Lease) Release(ctx context.Context, c redis.UniversalClient) error {
	if err := scriptRelease.Run(ctx, c, []string{l.Ref.Key}, l.Token()).Err(); err != nil {
		return fmt.Errorf("release lease %s: %w", l.Ref.Key, err)
	}
	return nil
}

// ParseToken splits "{owner_id}:{generation}" at its last colon.
func ParseToken(token string) (owner string, generation int64, err error) {
	i := strings.LastIndexByte(token, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("lease token %q has no generation", token)
	}
	gen, err := strconv.ParseInt(token[i+1:], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("lease token %q: %w", token, err)
	}
	return token[:i], gen, nil
}

// fenced maps the scripts' fence error to ErrFenced.
func fenced(err error, l Lease) error {
	if err != nil && strings.HasPrefix(err.Error(), fenceErr) {
		return fmt.Errorf("%s as %s: %w", l.Ref.Key, l.Token(), ErrFenced)
	}
	return err
}
