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

// RedisJournal is a Journal in Redis, written the way docs/runtime.md
// ("Status, halts and the lease in a handler") advises for effects that
// must not land late: one script checks that the lease is
// still the caller's (GET of its LeaseKey equals its token) before it
// writes, and skips an event whose sequence number was already applied. Its
// keys share the client's hash tag with the lease, so it runs on a cluster.
//
// A replayed event (an operator's seqbyctl dlq replay of an event the
// handler halted on) is the exception to the sequence rule: it comes after
// the client's later events, with its old sequence number, and was never
// applied. The journal applies it, once per replay, without moving the
// client's sequence back. A replay of an event another handler halted on
// is what it looks like to this one: a duplicate of an event it applied in
// its place, skipped by its sequence number.
type RedisJournal struct {
	C redis.UniversalClient
	// Prefix starts the journal's keys, "demo" when empty; journals of
	// two handlers of the same events need their own.
	Prefix string
}

// appendScript: KEYS lease, applied list, last applied seq, duplicates,
// applied replays; ARGV token, seq, entry, replay id ("" for an event
// that is no replay of this handler's). 1: applied; 0: a duplicate,
// skipped.
var appendScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("FENCED the lease is no longer this owner's")
end
local last = tonumber(redis.call('GET', KEYS[3]) or '0')
local seq = tonumber(ARGV[2])
if ARGV[4] ~= '' then
  -- A replay of an event this handler halted on: never applied, so its
  -- sequence number says nothing; the replay itself runs once.
  if redis.call('SADD', KEYS[5], ARGV[4]) == 0 then
    redis.call('INCR', KEYS[4])
    return 0
  end
  if seq > last then redis.call('SET', KEYS[3], ARGV[2]) end
  redis.call('RPUSH', KEYS[2], ARGV[3])
  return 1
end
if seq <= last then
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
	keys := []string{li.LeaseKey, j.key(client, "applied"), j.key(client, "seq"), j.key(client, "dups"), j.key(client, "replays")}
	err := appendScript.Run(ctx, j.C, keys, li.Token, seq, entry, replayOf(ctx, li.Handler)).Err()
	if err != nil && strings.HasPrefix(err.Error(), "FENCED") {
		return fmt.Errorf("%s #%d: %w", client, seq, ErrFenced)
	}
	return err
}

// replayOf identifies the replay ctx's event is, when it is one of an
// event handler halted on: its dead-letter entry, replayed at most once.
// "" for any other event, a replay meant for another handler included.
func replayOf(ctx context.Context, handler string) string {
	mi, ok := runtime.MessageFromContext(ctx)
	if !ok || mi.Replay == nil || mi.Replay.Handler != handler {
		return ""
	}
	return mi.Replay.DLQ + " " + mi.Replay.DLQEntryID
}

// Applied returns what was applied for client, in order.
func (j RedisJournal) Applied(ctx context.Context, client string) ([]string, error) {
	return j.C.LRange(ctx, j.key(client, "applied"), 0, -1).Result()
}

// Duplicates is how many re-run events of client were skipped.
func (j RedisJournal) Duplicates(ctx context.Context, client string) (int, error) {
	s, err := j.C.Get(ctx, j.key(client, "dups")).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}

// key is the journal's key what of client, in the client's slot:
// "demo:{client}:what".
func (j RedisJournal) key(client, what string) string {
	prefix := j.Prefix
	if prefix == "" {
		prefix = "demo"
	}
	return prefix + ":{" + client + "}:" + what
}
