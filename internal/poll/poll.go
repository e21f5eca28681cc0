// Package poll waits in tests on a condition with a deadline, never on a
// bare sleep: the test suites of the runtime, the outbox and seqbyctl
// share it.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until checks its condition.
const Interval = 5 * time.Millisecond

// Until polls cond every Interval until it holds, and fails the test,
// naming what it waited for, if it does not hold within the duration.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
			return // a testing.TB whose Fatalf returns
		}
		time.Sleep(Interval)
	}
}
