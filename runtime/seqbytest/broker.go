package seqbytest

import (
	"testing"

	"github.com/seqby/seqby/runtime"
)

// NewBroker returns an in-process broker with regs registered (the test
// fails if one is refused). See the package doc for how it runs them.
func NewBroker(t testing.TB, regs ...runtime.Registration) *runtime.InlineBroker {
	t.Helper()
	b := runtime.NewInlineBroker()
	if err := b.Register(regs...); err != nil {
		t.Fatalf("seqbytest: register: %v", err)
	}
	return b
}
