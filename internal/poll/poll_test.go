package poll

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure instead of
// ending the test, so Until's failure can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntil(t *testing.T) {
	n := 0
	Until(t, time.Minute, "the third check", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("stopped after %d checks, want 3", n)
	}
	r := &recorder{TB: t}
	Until(r, 0, "what never holds", func() bool { return false })
	if !strings.Contains(r.failed, "waiting for what never holds") {
		t.Fatalf("failure %q does not name what it waited for", r.failed)
	}
}
