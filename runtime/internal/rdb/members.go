package rdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Announce joins (join true, also the heartbeat) or leaves group's member
// set for owner, drops members silent for longer than ttl, and returns the
// number of live members. Scores are Redis time, so clock skew between
// instances does not matter.
func Announce(ctx context.Context, c redis.UniversalClient, group, owner string, ttl time.Duration, join bool) (int64, error) {
	return scriptMember.Run(ctx, c, []string{MembersKey(group)}, owner, ttl.Milliseconds(), joinFlag(join)).Int64()
}

// AnnounceAll joins owner to every group's member set in one pipeline,
// and records how many of each group's partitions owner holds (owned[i]
// for groups[i]) for ttl (OwnedKey). A pipeline has no EVAL fallback: an
// IsNoScript error means the server lost its script cache; LoadScripts,
// then announce again.
func AnnounceAll(ctx context.Context, c redis.UniversalClient, groups []string, owned []int, owner string, ttl time.Duration) error {
	pipe := c.Pipeline()
	for i, g := range groups {
		scriptMember.EvalSha(ctx, pipe, []string{MembersKey(g)}, owner, ttl.Milliseconds(), "1")
		pipe.Set(ctx, OwnedKey(g, owner), owned[i], ttl)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// OwnedByOthers sums what the owners other than self last recorded as
// owned in group (AnnounceAll). complete is false when some owner has no
// record (it stopped announcing, or runs a version that does not record):
// the sum then says nothing.
func OwnedByOthers(ctx context.Context, c redis.UniversalClient, group, self string, owners map[string]bool) (sum int64, complete bool, err error) {
	pipe := c.Pipeline()
	var cmds []*redis.StringCmd
	for o := range owners {
		if o != self {
			cmds = append(cmds, pipe.Get(ctx, OwnedKey(group, o)))
		}
	}
	if len(cmds) == 0 {
		return 0, true, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, fmt.Errorf("read owned counts of %s: %w", group, err)
	}
	complete = true
	for _, cmd := range cmds {
		n, err := cmd.Int64()
		if err != nil {
			complete = false
			continue
		}
		sum += n
	}
	return sum, complete, nil
}

func joinFlag(join bool) string {
	if join {
		return "1"
	}
	return "0"
}

// LiveMembers returns the members of group's member set whose last
// announcement is younger than ttl.
func LiveMembers(ctx context.Context, c redis.UniversalClient, group string, ttl time.Duration) (map[string]bool, error) {
	names, err := scriptLiveMembers.Run(ctx, c, []string{MembersKey(group)}, ttl.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("read live members of %s: %w", group, err)
	}
	live := make(map[string]bool, len(names))
	for _, n := range names {
		live[n] = true
	}
	return live, nil
}

// DeleteIdleConsumer deletes consumer from group on stream only if it has
// nothing pending, in one step, so an entry it read after the caller's
// check is never dropped with it. It reports whether it deleted.
func DeleteIdleConsumer(ctx context.Context, c redis.UniversalClient, stream, group, consumer string) (bool, error) {
	n, err := scriptDelIdleConsumer.Run(ctx, c, []string{stream}, group, consumer).Int64()
	return n == 1, err
}
