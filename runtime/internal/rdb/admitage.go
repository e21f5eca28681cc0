package rdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// An engine admits a handler attempt whose lease confirmation was sent
// holding a concurrency slot only while that confirmation is younger than
// its admitted confirmation age, which it stores here before relying on
// it (runtime/attempt.go); Pause reads the largest and waits that long
// after storing its mark (inspect.Inspector.Pause). One sorted set per
// handler, AdmitAgeKey, members "<age ms>|<incarnation>" scored by when
// they end (Redis ms): only engines that raised their age above
// Options.VerifyBound write there, a member counts until its end (AdmitAge
// reads by Redis's clock), and the set ends with its last member.

var (
	scriptAdmitAge     = script("admit_age")
	scriptAdmitAgeRead = script("admit_age_read")
)

// StoreAdmitAge records that incarnation admits group's attempts whose
// lease confirmation is up to age old (rounded up to a millisecond), for
// ttl from when Redis runs the call. Safe to run twice: the member is the
// same, and its end only moves later; a lower age stored later does not
// lower what AdmitAge reads while the higher one lasts.
func StoreAdmitAge(ctx context.Context, c redis.UniversalClient, group, incarnation string, age, ttl time.Duration) error {
	ms := (age + time.Millisecond - 1) / time.Millisecond
	member := strconv.FormatInt(int64(ms), 10) + "|" + incarnation
	if err := scriptAdmitAge.Run(ctx, c, []string{AdmitAgeKey(group)}, member, ttl.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("store the admitted confirmation age of %s (%s): %w", group, AdmitAgeKey(group), err)
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
	members, err := scriptAdmitAgeRead.Run(ctx, c, []string{AdmitAgeKey(group)}).StringSlice()
	if err != nil {
		return 0, fmt.Errorf("read the admitted confirmation ages of %s (%s): %w", group, AdmitAgeKey(group), err)
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
