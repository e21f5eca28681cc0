package rdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Ownership is what OwnerStates found for one partition.
type Ownership int

const (
	// Owned: the lease is held.
	Owned Ownership = iota
	// FreeWithWork: no lease, and the lanes hold work for the group.
	FreeWithWork
	// FreeIdle: no lease and nothing to do; no owner is needed.
	FreeIdle
	// Unreadable: the check itself failed for this partition (a lane
	// holding something other than a stream, an ACL refusal); the error
	// is returned alongside.
	Unreadable
)

// OwnerCheck names one partition for OwnerStates: its lease and the lanes
// the lease covers (all in the lease's slot).
type OwnerCheck struct {
	Lease LeaseRef
	Lanes []string
}

// OwnerStates asks, in one pipeline of one script per partition, whether
// each partition is owned and, if not, whether group has work on it. A
// partition whose check fails with an error reply is Unreadable, the
// first such error returned as unreadable; err is a failure of the whole
// call (the network). A pipeline has no EVAL fallback: after a NOSCRIPT
// it loads the scripts and asks once more.
func OwnerStates(ctx context.Context, c redis.UniversalClient, group string, checks []OwnerCheck) (states []Ownership, unreadable, err error) {
	for try := 0; ; try++ {
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, len(checks))
		for i, ch := range checks {
			cmds[i] = scriptOwnerState.EvalSha(ctx, pipe, append([]string{ch.Lease.Key}, ch.Lanes...), group)
		}
		pipe.Exec(ctx) // errors are read per command below
		noscript := false
		for _, cmd := range cmds {
			noscript = noscript || IsNoScript(cmd.Err())
		}
		if noscript && try == 0 {
			if err := LoadScripts(ctx, c); err != nil {
				return nil, nil, err
			}
			continue
		}
		out := make([]Ownership, len(checks))
		for i, cmd := range cmds {
			n, err := cmd.Int64()
			if err != nil {
				var reply redis.Error
				if !errors.As(err, &reply) {
					return nil, nil, err
				}
				out[i] = Unreadable
				if unreadable == nil {
					unreadable = fmt.Errorf("checking %s: %w", checks[i].Lease.Key, err)
				}
				continue
			}
			switch n {
			case 1:
				out[i] = Owned
			case 0:
				out[i] = FreeWithWork
			default:
				out[i] = FreeIdle
			}
		}
		return out, unreadable, nil
	}
}
