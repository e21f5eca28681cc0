package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// An engine admits a handler attempt whose lease confirmation was sent
// holding a concurrency slot only while that confirmation is younger than
// its admitted confirmation age, which it stores here before relying on
// it (package lease, the gate); Pause reads the largest and waits that long
// after storing its mark (inspect.Inspector.Pause). The records are fields
// of the handler's control hash (ControlKey), "admit:<age ms>|<incarnation>"
// holding when they end (Redis ms): only engines that raised their age
// above Options.VerifyBound write there, a record counts until its end
// (AdmitAge reads by Redis's clock), and each store drops the ended ones.

var (
	scriptAdmitAge     = script("admit_age")
	scriptAdmitAgeRead = script("admit_age_read")
)

// ErrAdmitAgeNotReplicated means an admitted confirmation age is stored on
// the primary, but fewer replicas than the strict replication mode asks
// for acknowledged it in time: the engine does not rely on it, and stores
// it again when a confirmation needs it (attach the missing replicas).
var ErrAdmitAgeNotReplicated = errors.New("the admitted confirmation age is stored, but fewer replicas than Options.ReplicaAcks acknowledged it")

// StoreAdmitAge records that incarnation admits group's attempts whose
// lease confirmation is up to age old (rounded up to a millisecond), for
// ttl from when Redis runs the call. Safe to run twice: the member is the
// same, and its end only moves later; a lower age stored later does not
// lower what AdmitAge reads while the higher one lasts.
func StoreAdmitAge(ctx context.Context, c redis.UniversalClient, group, incarnation string, age, ttl time.Duration) error {
	return StoreAdmitAgeAcked(ctx, c, group, incarnation, age, ttl, 0, 0)
}

// StoreAdmitAgeAcked is StoreAdmitAge that, when replicas is above 0 (the
// strict replication mode), then waits up to timeout for that many
// replicas of the key's primary to have the store (WAIT, on the
// connection that stored it; on a Redis Cluster a connection to the
// control hash's node, since the key has no hash tag and lives on a shard
// of its own). Fewer is ErrAdmitAgeNotReplicated: a failover could lose the
// store, and with it the wait an operator's Pause owes the engine's
// attempts, so the caller must not rely on the age. Safe to run twice, as
// StoreAdmitAge: a connection that lost the reply is not used again, so
// the store is sent again (Resend) on a new one, and each run writes
// (admit_age.lua), so WAIT there counts from a store at least as late.
func StoreAdmitAgeAcked(ctx context.Context, c redis.UniversalClient, group, incarnation string, age, ttl time.Duration, replicas int, timeout time.Duration) error {
	ms := (age + time.Millisecond - 1) / time.Millisecond
	member := strconv.FormatInt(int64(ms), 10) + "|" + incarnation
	key := ControlKey(group)
	if replicas <= 0 {
		if err := scriptAdmitAge.Run(ctx, c, []string{key}, member, ttl.Milliseconds()).Err(); err != nil {
			return fmt.Errorf("store the admitted confirmation age of %s (%s): %w", group, key, err)
		}
		return nil
	}
	var n int64
	err := Resend(ctx, func() error {
		var conn *redis.Conn
		switch cc := c.(type) {
		case *redis.ClusterClient:
			node, err := cc.MasterForKey(ctx, key)
			if err != nil {
				return fmt.Errorf("find the node of %s: %w", key, err)
			}
			conn = node.Conn()
		case *redis.Client:
			conn = cc.Conn()
		default:
			return fmt.Errorf("the strict replication mode needs a *redis.Client or *redis.ClusterClient to WAIT on, not a %T", c)
		}
		defer conn.Close()
		if err := scriptAdmitAge.Run(ctx, conn, []string{key}, member, ttl.Milliseconds()).Err(); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		var err error
		if n, err = conn.Wait(ctx, replicas, timeout).Result(); err != nil {
			return fmt.Errorf("%w: WAIT %d: %w", ErrAdmitAgeNotReplicated, replicas, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store the admitted confirmation age of %s: %w", group, err)
	}
	if n < int64(replicas) {
		return fmt.Errorf("store the admitted confirmation age of %s: %w: %d of %d within %v", group, ErrAdmitAgeNotReplicated, n, replicas, timeout)
	}
	return nil
}

// AdmitAge returns the largest admitted confirmation age recorded for
// group whose record has not ended by Redis's clock (0: none). It reads
// through admit_age_read.lua, so the call goes to the primary however the
// client routes reads: a replica may not have a store that the primary
// answered, and an engine relies on a store once the primary answered it.
// Only reads: seqbyctl's ACL user may run it.
func AdmitAge(ctx context.Context, c redis.UniversalClient, group string) (time.Duration, error) {
	members, err := scriptAdmitAgeRead.Run(ctx, c, []string{ControlKey(group)}).StringSlice()
	if err != nil {
		return 0, fmt.Errorf("read the admitted confirmation ages of %s (%s): %w", group, ControlKey(group), err)
	}
	var most time.Duration
	for _, m := range members {
		ms, _, _ := strings.Cut(m, "|")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read the admitted confirmation ages of %s: member %q is not <ms>|<incarnation>", group, m)
		}
		most = max(most, time.Duration(n)*time.Millisecond)
	}
	return most, nil
}

// AdmitAgeRecords returns every admitted confirmation age record of group
// in its control hash, ended or not, "<age ms>|<incarnation>", sorted, with
// when each ends (Redis ms): for tests and operators.
func AdmitAgeRecords(ctx context.Context, c redis.UniversalClient, group string) (members []string, ends map[string]int64, err error) {
	all, err := c.HGetAll(ctx, ControlKey(group)).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read the admitted confirmation ages of %s (%s): %w", group, ControlKey(group), err)
	}
	ends = map[string]int64{}
	for f, v := range all {
		if m, ok := strings.CutPrefix(f, "admit:"); ok {
			members = append(members, m)
			ends[m], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	slices.Sort(members)
	return members, ends, nil
}
