package lease

import (
	"slices"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A spike raises the admitted age to the cap; once its record has ended
// (LeaseTTL - LeaseMargin after the store, on the engine's clock), the
// next raise stores twice the confirmation's age, not the cap again, so
// Pause no longer waits the spike out (seen before: the second raise
// stored the 500ms cap again, and every Pause waited half the lease).
// While the record lasts a smaller raise lowers nothing.
func TestAdmitAgeComesDownOnceItsRecordEnded(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ls := newLeases(t, c, "d", time.Second, nil) // LeaseMargin 100ms
	members := func() []string {
		t.Helper()
		ms, _, err := rdb.AdmitAgeRecords(ctx, c, "h")
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	if err := ls.raiseAdmitAge(ctx, "h", 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if l := ls.admitAge("h").limit(); l.age != 500*time.Millisecond {
		t.Fatalf("after a 400ms confirmation the admitted age is %v; want the cap, 500ms (LeaseTTL/2)", l.age)
	}
	if err := ls.raiseAdmitAge(ctx, "h", 40*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if l := ls.admitAge("h").limit(); l.age != 500*time.Millisecond {
		t.Fatalf("a smaller raise while the record lasts left %v; want 500ms", l.age)
	}
	until := ls.admitAge("h").limit().until
	time.Sleep(time.Until(until) + 10*time.Millisecond)
	if err := ls.raiseAdmitAge(ctx, "h", 40*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if l := ls.admitAge("h").limit(); l.age != 80*time.Millisecond {
		t.Fatalf("a raise after the record ended left %v; want 80ms, twice the confirmation's", l.age)
	}
	inc := ls.cfg.Incarnation
	if got, want := members(), []string{"500|" + inc, "80|" + inc}; !slices.Equal(got, want) {
		t.Fatalf("stored %v; want %v (the 500ms member until its end in Redis)", got, want)
	}
	time.Sleep(300 * time.Millisecond) // the 500ms member has ended in Redis too
	if a, err := rdb.AdmitAge(ctx, c, "h"); err != nil || a != 80*time.Millisecond {
		t.Fatalf("Pause reads %v (%v); want 80ms", a, err)
	}
}

// An admitted age admits a confirmation within VerifyBound always, and
// one within the age only while its record lasts.
func TestAdmitLimit(t *testing.T) {
	now := time.Now()
	l := admitLimit{age: 100 * time.Millisecond, until: now.Add(time.Second)}
	for _, tt := range []struct {
		age  time.Duration
		at   time.Time
		want bool
	}{
		{20 * time.Millisecond, now, true},
		{20 * time.Millisecond, now.Add(time.Hour), true}, // within the bound: always
		{80 * time.Millisecond, now, true},
		{80 * time.Millisecond, now.Add(time.Second), false}, // the record ended
		{120 * time.Millisecond, now, false},
	} {
		if got := l.admits(tt.age, 25*time.Millisecond, tt.at); got != tt.want {
			t.Errorf("admits(%v, at +%v) = %v, want %v", tt.age, tt.at.Sub(now), got, tt.want)
		}
	}
}
