package rdb

import (
	"errors"
	"fmt"
	"strings"
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

// fenceErr prefixes the error a script returns when its lease check fails.
const fenceErr = "SEQBY_FENCED"

// isFenceErr reports whether err is a script's fence error.
func isFenceErr(err error) bool { return err != nil && strings.HasPrefix(err.Error(), fenceErr) }

// fenced maps a script's fence error to ErrFenced, naming the lease.
func fenced(err error, l Lease) error {
	if isFenceErr(err) {
		return fmt.Errorf("%s as %s: %w", l.Ref.Key, l.Token(), ErrFenced)
	}
	return err
}
