package rdb

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrLeaseHeld means another owner holds the lease; try again after it
// expires or is released.
var ErrLeaseHeld = errors.New("lease is held by another owner")

// ErrCold means an acquire found the partition cold: nothing to read,
// nothing pending, and idle past the reap threshold. It is left unowned for
// the reaper; a publish to it makes it claimable again.
var ErrCold = errors.New("partition is cold (empty and idle): left for the reaper")

// ErrLeaseLost means a renew found the lease gone or held by another
// token: the owner must stop working on what the lease covered.
var ErrLeaseLost = errors.New("lease lost; stop processing the partition and let its new owner continue")

// ErrFenced is returned by a read, ack or save whose lease token no longer
// holds. The caller is a stale owner: it must abandon the partition and
// never read or ack it again under that generation.
var ErrFenced = errors.New("fenced: the lease is no longer held at this generation; abandon the partition")

// ErrPaused is returned by a fenced read, ack or verification whose lease
// holds but whose partition an operator paused (its PauseKey exists):
// the acks it carried were done, nothing was read, and no attempt may
// start under that confirmation. The owner keeps the lease and waits for
// a wake-up (Resume signals the key).
var ErrPaused = errors.New("the partition is paused by an operator; no attempt starts until it is resumed (seqbyctl resume)")

// fenceErr prefixes the error a script returns when its lease check fails.
const fenceErr = "SEQBY_FENCED"

// pauseErr prefixes the error a script returns when the partition is
// paused.
const pauseErr = "SEQBY_PAUSED"

// isFenceErr reports whether err is a script's fence error.
func isFenceErr(err error) bool { return err != nil && strings.HasPrefix(err.Error(), fenceErr) }

// fenced maps a script's fence error to ErrFenced, naming the lease.
func fenced(err error, l Lease) error {
	if isFenceErr(err) {
		return fmt.Errorf("%s as %s: %w", l.Ref.Key, l.Token(), ErrFenced)
	}
	if err != nil && strings.HasPrefix(err.Error(), pauseErr) {
		return fmt.Errorf("%s: %w", l.Ref.Key, ErrPaused)
	}
	return err
}

// Permanent reports whether a Redis error met by an engine loop cannot
// pass by retrying: the server refused the command itself (NOPERM: the ACL
// user lacks a command or key; CROSSSLOT; WRONGTYPE: a key holds something
// seqby did not write; NOSCRIPT where no fallback exists; NOAUTH or
// WRONGPASS; a script error or an unknown command, which Redis reports as
// ERR). Everything else is transient and worth retrying with backoff: the
// network (timeouts, refused or reset connections), a server loading its
// data (LOADING), a cluster in motion (TRYAGAIN, CLUSTERDOWN, MOVED, ASK,
// MASTERDOWN, READONLY after a failover), a busy script (BUSY), memory
// pressure (OOM), too many clients.
func Permanent(err error) bool {
	if errors.Is(err, errBadSlice) || errors.Is(err, ErrRoundTooLarge) {
		return true // a defect: the same call is refused again
	}
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range transientReplies {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	for _, p := range permanentReplies {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// transientReplies are error replies that pass by themselves; checked
// first, as some begin with ERR.
var transientReplies = []string{"ERR max number of clients", "LOADING", "TRYAGAIN", "CLUSTERDOWN", "MOVED", "ASK",
	"MASTERDOWN", "READONLY", "BUSY", "OOM", "NOREPLICAS", "UNBLOCKED"}

// permanentReplies are error replies that only an operator can cure.
var permanentReplies = []string{"NOPERM", "CROSSSLOT", "WRONGTYPE", "NOSCRIPT", "NOAUTH", "WRONGPASS", "EXECABORT", "ERR"}
