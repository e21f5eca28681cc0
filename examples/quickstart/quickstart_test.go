package quickstart_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/seqby/seqby/examples/quickstart"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// TestLedger: each account's events reach Accounts in publish order, as
// signed changes.
func TestLedger(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []runtime.Message
		want map[string][]int64
	}{
		{"one account", []runtime.Message{
			quickstart.Deposited{AccountID: "a", Amount: 10},
			&quickstart.Withdrawn{AccountID: "a", Amount: 3},
		}, map[string][]int64{"a": {10, -3}}},
		{"two accounts interleaved", []runtime.Message{
			quickstart.Deposited{AccountID: "a", Amount: 1},
			quickstart.Deposited{AccountID: "b", Amount: 2},
			quickstart.Withdrawn{AccountID: "b", Amount: 2},
			quickstart.Deposited{AccountID: "a", Amount: 4},
		}, map[string][]int64{"a": {1, 4}, "b": {2, -2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accounts := &quickstart.Memory{}
			b := seqbytest.NewBroker(t, (&quickstart.Ledger{Accounts: accounts}).SeqbyRegistration())
			for _, m := range tc.msgs {
				if err := b.Publish(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
			for account, want := range tc.want {
				if got := accounts.Changes(account); !slices.Equal(got, want) {
					t.Errorf("%s: changes %v, want %v", account, got, want)
				}
			}
		})
	}
}

// TestBadKeyIsRefused: an account id that breaks the key rules fails the
// publish before anything runs.
func TestBadKeyIsRefused(t *testing.T) {
	accounts := &quickstart.Memory{}
	b := seqbytest.NewBroker(t, (&quickstart.Ledger{Accounts: accounts}).SeqbyRegistration())
	err := b.Publish(context.Background(), quickstart.Deposited{AccountID: "a:b", Amount: 1})
	if !errors.Is(err, runtime.ErrKeyColon) {
		t.Fatalf("publish for account a:b: %v, want ErrKeyColon", err)
	}
	if got := accounts.Changes("a:b"); len(got) > 0 {
		t.Fatalf("applied %v", got)
	}
}
