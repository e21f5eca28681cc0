package redistest

import "testing"

func TestStartAnswersPing(t *testing.T) {
	s := New(t)
	if err := ping(s.Addr); err != nil {
		t.Fatalf("ping %s: %v", s.Addr, err)
	}
	if s.Addr == "127.0.0.1:6379" {
		t.Fatal("must never use the default port")
	}
}
