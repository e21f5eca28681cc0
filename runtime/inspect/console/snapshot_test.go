package console

import (
	"errors"
	"testing"
	"time"
)

// When a view reads a shared read anew: when there is none, when the
// sampler asks, and when it expired or an action dropped it, but only if
// it was cheap; an expensive one the sampler alone renews.
func TestKept(t *testing.T) {
	const ttl = time.Minute
	for _, tc := range []struct {
		name    string
		has     bool
		age     time.Duration // since the read ended
		took    time.Duration
		dropped bool
		fresh   bool
		reads   bool
	}{
		{"none yet", false, 0, 0, false, false, true},
		{"young", true, time.Second, time.Millisecond, false, false, false},
		{"expired, cheap", true, 2 * ttl, time.Millisecond, false, false, true},
		{"expired, expensive", true, 2 * ttl, 5 * time.Second, false, false, false},
		{"dropped, cheap", true, time.Second, time.Millisecond, true, false, true},
		{"dropped, expensive", true, time.Second, 5 * time.Second, true, false, false},
		{"dropped, the sampler", true, time.Second, 5 * time.Second, true, true, true},
		{"the sampler", true, time.Second, 5 * time.Second, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &kept[int]{has: tc.has, done: time.Now().Add(-tc.age), took: tc.took, dropped: tc.dropped, val: 1}
			v, _, err := k.get(ttl, tc.fresh, func() (int, error) { return 2, nil })
			if err != nil || (v == 2) != tc.reads {
				t.Fatalf("got %d, %v; read anew: want %v", v, err, tc.reads)
			}
			if tc.reads && k.dropped {
				t.Fatal("a new read is still marked dropped")
			}
		})
	}
	// A failed read keeps the old one.
	k := &kept[int]{has: true, val: 1, dropped: true}
	if _, _, err := k.get(ttl, true, func() (int, error) { return 0, errors.New("down") }); err == nil {
		t.Fatal("a failed read returned no error")
	}
	if v, _, ok := k.peek(); !ok || v != 1 {
		t.Fatalf("after a failed read: %d, %v; want the old read", v, ok)
	}
}
