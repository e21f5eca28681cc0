package billing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/runtime"
)

// RedisJournal is a Journal in Redis, written the way the README advises
// for effects that must not land late: one script checks that the lease is
// still the caller's (GET of its LeaseKey equals its token) before it
// writes, and skips an event whose sequence number was already applied. Its
// keys share the client's hash tag with the lease, so it runs on a cluster.
type RedisJournal struct{ C redis.UniversalClient }

// appendScript: KEYS lease, applied list, last applied seq, duplicates;
// ARGV token, seq, entry. 1: applied; 0: a duplicate, skipped.
var appendScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("FENCED the lease is no longer this owner's")
end
local last = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[2]) <= last then
  redis.call('INCR', KEYS[4])
  return 0
end
redis.call('SET', KEYS[3], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[3])
return 1`)

// ErrFenced means the caller's lease is gone: another owner has the
// client, and this write was refused.
var ErrFenced = errors.New("journal write refused: the lease is no longer this owner's")

// Append implements Journal.
func (j RedisJournal) Append(ctx context.Context, client string, seq int, entry string) error {
	li, ok := runtime.LeaseFromContext(ctx)
	if !ok {
		return errors.New("journal: no lease in the context; append only from a keyed handler")
	}
	keys := []string{li.LeaseKey, appliedKey(client), "demo:{" + client + "}:seq", duplicatesKey(client)}
	err := appendScript.Run(ctx, j.C, keys, li.Token, seq, entry).Err()
	if err != nil && strings.HasPrefix(err.Error(), "FENCED") {
		return fmt.Errorf("%s #%d: %w", client, seq, ErrFenced)
	}
	return err
}

// Applied returns what was applied for client, in order.
func (j RedisJournal) Applied(ctx context.Context, client string) ([]string, error) {
	return j.C.LRange(ctx, appliedKey(client), 0, -1).Result()
}

// Duplicates is how many re-run events of client were skipped.
func (j RedisJournal) Duplicates(ctx context.Context, client string) (int, error) {
	s, err := j.C.Get(ctx, duplicatesKey(client)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}

func appliedKey(client string) string    { return "demo:{" + client + "}:applied" }
func duplicatesKey(client string) string { return "demo:{" + client + "}:dups" }
