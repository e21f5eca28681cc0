package redistest

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Refusal is a go-redis hook (Client.AddHook) that answers chosen
// commands with an error without sending them, as a Redis that refuses
// them would (LOADING, NOPERM, ...): for a test of what a caller does when
// one kind of call fails and the rest go through. Commands in pipelines
// and transactions pass untouched.
type Refusal struct {
	mu    sync.Mutex
	rules []*refusalRule
	n     int
}

type refusalRule struct {
	match Match
	err   error
	left  int // < 0: until Disarm
}

// Arm makes the next n commands match accepts fail with err (n < 0: every
// one until Disarm). Rules armed earlier go first.
func (r *Refusal) Arm(match Match, err error, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = append(r.rules, &refusalRule{match: match, err: err, left: n})
}

// Disarm drops every rule still armed.
func (r *Refusal) Disarm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = nil
}

// Refused is how many commands have been refused so far.
func (r *Refusal) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// take returns the error for a command given as args, or nil when no
// armed rule matches, and counts it.
func (r *Refusal) take(args []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rule := range r.rules {
		if rule.left != 0 && rule.match(args) {
			if rule.left > 0 {
				rule.left--
			}
			r.n++
			return rule.err
		}
	}
	return nil
}

// DialHook passes dials through.
func (r *Refusal) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook answers a matching command with its rule's error.
func (r *Refusal) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := make([]string, len(cmd.Args()))
		for i, a := range cmd.Args() {
			args[i] = fmt.Sprint(a)
		}
		if err := r.take(args); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook passes pipelines through.
func (r *Refusal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
