package seqbytest

import (
	"bytes"
	"log/slog"
	"testing"
)

// TestSinkAfterTheTest: a line logged after the test's cleanup (an engine
// that did not stop) goes to the late writer, naming the test and its
// position, instead of the test's output (which would panic then).
func TestSinkAfterTheTest(t *testing.T) {
	var out, late bytes.Buffer
	s := &sink{w: &out, late: &late, pos: "x_test.go:7", test: "TestX"}
	log := slog.New(&tHandler{s: s}).With("handler", "h")
	log.Info("not logged: below a warning")
	log.Warn("before", "n", 1)
	s.close()
	log.Error("after")
	if got, want := out.String(), "x_test.go:7: WARN before handler=h n=1\n"; got != want {
		t.Errorf("the test's output is %q, want %q", got, want)
	}
	if got, want := late.String(), "seqbytest: after TestX ended: x_test.go:7: ERROR after handler=h\n"; got != want {
		t.Errorf("late lines are %q, want %q", got, want)
	}
}
