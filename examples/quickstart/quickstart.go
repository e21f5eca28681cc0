// Package quickstart is a small user package, like the one the README's
// quick start builds: two events of the category "account", partitioned by
// account, and Ledger, a handler sequential by account, all declared with
// //seqby: markers; seqby_gen.go is what seqgen wrote for them. The
// runnable examples of runtime, runtime/seqbytest and runtime/inspect use
// it the way a service uses its own package.
//
// It holds no process: no main, no globals, no Redis. Ledger's one
// dependency, Accounts, is where the examples plug in their effects (in
// memory, fenced in Redis, or failing).
package quickstart

import (
	"context"
	"sync"
)

// Deposited is published when money is paid into an account.
//
//seqby:event=account
//seqby:key=account_id
type Deposited struct {
	AccountID string `json:"account_id"`
	Amount    int64  `json:"amount"` // in cents
}

// Withdrawn is published when money is taken out of an account. The
// category "account" is partitioned by account_id, so it has the key of
// its category's first event.
//
//seqby:event=account
type Withdrawn struct {
	AccountID string `json:"account_id"`
	Amount    int64  `json:"amount"` // in cents
}

// Ledger applies each account's deposits and withdrawals to Accounts.
// Sequential by account_id: one account's events are applied one at a
// time, in publish order, whichever engine instance owns the account,
// while different accounts run in parallel. Its name is fixed by
// //seqby:name, so moving the type to another package keeps its consumer
// group (and does not handle the retained history again).
//
//seqby:handler
//seqby:key=account_id
//seqby:name=quickstart.ledger
type Ledger struct {
	// Accounts receives the ledger's effects.
	Accounts Accounts
}

// OnDeposited adds a deposit to its account.
func (l *Ledger) OnDeposited(ctx context.Context, e Deposited) error {
	return l.Accounts.Add(ctx, e.AccountID, e.Amount)
}

// OnWithdrawn takes a withdrawal from its account.
func (l *Ledger) OnWithdrawn(ctx context.Context, e *Withdrawn) error {
	return l.Accounts.Add(ctx, e.AccountID, -e.Amount)
}

// Accounts keeps balances. Add is called from the engine's goroutines,
// one call at a time per account, with the message's context: its lease
// (runtime.LeaseFromContext) and its delivery (runtime.MessageFromContext).
// An error is retried, and then halts the account's partition;
// runtime.Permanent(err) halts it at once.
type Accounts interface {
	// Add adds delta (negative for a withdrawal) to account's balance.
	Add(ctx context.Context, account string, delta int64) error
}

// AccountsFunc adapts a function to Accounts.
type AccountsFunc func(ctx context.Context, account string, delta int64) error

// Add calls f.
func (f AccountsFunc) Add(ctx context.Context, account string, delta int64) error {
	return f(ctx, account, delta)
}

// Memory is Accounts in memory, safe for concurrent use; its zero value is
// ready. It records every change, in the order it was applied.
type Memory struct {
	mu      sync.Mutex
	changes map[string][]int64
}

// Add implements Accounts.
func (m *Memory) Add(_ context.Context, account string, delta int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changes == nil {
		m.changes = map[string][]int64{}
	}
	m.changes[account] = append(m.changes[account], delta)
	return nil
}

// Changes returns account's changes in the order they were applied.
func (m *Memory) Changes(account string) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int64(nil), m.changes[account]...)
}

// Balance is the sum of account's changes.
func (m *Memory) Balance(account string) int64 {
	var sum int64
	for _, d := range m.Changes(account) {
		sum += d
	}
	return sum
}
