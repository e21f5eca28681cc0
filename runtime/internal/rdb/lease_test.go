package rdb

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

func TestLeaseAcquireRenewRelease(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ref := PartitionLease("order:a", "h")
	l, err := Acquire(ctx, c, ref, "p1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Generation <= 0 || l.Token() != "p1:"+strconv.FormatInt(l.Generation, 10) {
		t.Fatalf("got %+v token %s, want a positive generation in the token", l, l.Token())
	}
	if got := c.Get(ctx, ref.Key).Val(); got != l.Token() {
		t.Fatalf("lease key holds %q", got)
	}
	if _, err := Acquire(ctx, c, ref, "p2", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second acquire: %v, want ErrLeaseHeld", err)
	}
	if err := l.Renew(ctx, c, time.Minute); err != nil {
		t.Fatalf("renew: %v", err)
	}
	stale := Lease{Ref: ref, Owner: "p1", Generation: 7}
	if err := stale.Renew(ctx, c, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew with a wrong token: %v, want ErrLeaseLost", err)
	}
	if err := stale.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.Exists(ctx, ref.Key).Val() != 1 {
		t.Fatal("release with a wrong token deleted the lease")
	}
	if err := l.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.Exists(ctx, ref.Key).Val() != 0 {
		t.Fatal("release did not delete the lease")
	}
	if err := l.Renew(ctx, c, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew after release: %v, want ErrLeaseLost", err)
	}
	l2, err := Acquire(ctx, c, ref, "p2", time.Minute)
	if err != nil || l2.Generation <= l.Generation {
		t.Fatalf("re-acquire after release: %+v %v, want a generation above %d", l2, err, l.Generation)
	}
}

func TestLeaseExpiryThenReacquireIncrementsGeneration(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ref := PartitionLease("order:a", "h")
	l1, err := Acquire(ctx, c, ref, "p1", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "lease expiry", func() bool { return c.Exists(ctx, ref.Key).Val() == 0 })
	l2, err := Acquire(ctx, c, ref, "p2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Generation <= l1.Generation {
		t.Fatalf("generation %d after %d", l2.Generation, l1.Generation)
	}
	if err := l1.Renew(ctx, c, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("expired owner renewed: %v", err)
	}
	// Without its counter (lost, or reaped) the next generation is still
	// higher: it comes from Redis time.
	c.Del(ctx, ref.Key, ref.Meta)
	l3, err := Acquire(ctx, c, ref, "p1", time.Minute)
	if err != nil || l3.Generation <= l2.Generation {
		t.Fatalf("generation went to %d (%v) after %d with the counter deleted", l3.Generation, err, l2.Generation)
	}
}

// The generation keeps increasing across a restart that loses the counter:
// without persistence (everything gone) and from an older snapshot (the
// counter older than the last lease). A plain INCR counter went back to 1,
// and to the snapshot's value.
func TestGenerationSurvivesDataLoss(t *testing.T) {
	ctx := ctxT(t)
	for _, tt := range []struct {
		name     string
		snapshot bool
	}{{"no persistence", false}, {"older snapshot", true}} {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.New(t)
			c := redis.NewClient(&redis.Options{Addr: s.Addr})
			defer c.Close()
			ref := PartitionLease("order:{a}", "h")
			var last int64
			acquire := func() {
				t.Helper()
				l, err := Acquire(ctx, c, ref, "p", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if l.Generation <= last {
					t.Fatalf("generation %d after %d", l.Generation, last)
				}
				last = l.Generation
				if err := l.Release(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			acquire()
			if tt.snapshot {
				if err := c.Save(ctx).Err(); err != nil { // dump.rdb at this generation
					t.Fatal(err)
				}
			}
			acquire()
			acquire()
			s.Kill()
			if err := s.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			stored, _ := c.HGet(ctx, ref.Meta, MetaGen).Int64()
			if tt.snapshot == (stored == 0) || stored >= last {
				t.Fatalf("after the restart the counter holds %d (last generation %d): the restart did not lose it as the case needs", stored, last)
			}
			acquire()
		})
	}
}

func TestParseToken(t *testing.T) {
	tests := []struct {
		token, owner string
		gen          int64
		ok           bool
	}{
		{"p1:3", "p1", 3, true},
		{"host:12:7", "host:12", 7, true},
		{"w1~0a1b2c3d4e5f6a7b:9", "w1", 9, true},
		{"a~b~0a1b:9", "a~b", 9, true},
		{"nogen", "", 0, false},
		{"p1:x", "", 0, false},
	}
	for _, tt := range tests {
		o, g, err := ParseToken(tt.token)
		if (err == nil) != tt.ok || (tt.ok && (o != tt.owner || g != tt.gen)) {
			t.Errorf("ParseToken(%q) = %q, %d, %v", tt.token, o, g, err)
		}
	}
}

// TestAttemptMark follows a halted head's attempt mark: set under the
// lease until its expiry, extended with the lease, deleted by its own
// token only, and never extended once the lease or the mark moved on.
func TestAttemptMark(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ref := PartitionLease(PartitionStream("o", "a"), "g")
	l, err := Acquire(ctx, c, ref, "p1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mark := func() (tok string, exp int64) {
		m := c.HGet(ctx, ref.Meta, MetaAttempt).Val()
		i := strings.LastIndexByte(m, ' ')
		if i < 0 {
			return m, 0
		}
		exp, _ = strconv.ParseInt(m[i+1:], 10, 64)
		return m[:i], exp
	}
	if err := l.BeginAttempt(ctx, c, time.Minute); err != nil {
		t.Fatal(err)
	}
	tok, exp := mark()
	if tok != l.Token() {
		t.Fatalf("mark names %q, want %q", tok, l.Token())
	}
	now := time.Now().UnixMilli()
	if exp < now+50_000 || exp > now+70_000 {
		t.Fatalf("mark expires at %d, want the lease's expiry, about %d", exp, now+60_000)
	}
	// The lease renewed to an hour, with its mark.
	if err := LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	if errs, _ := RenewAll(ctx, c, []Lease{l}, []bool{true}, time.Hour); errs[0] != nil {
		t.Fatalf("RenewAll: %v", errs[0])
	}
	_, exp2 := mark()
	if exp2 < now+3_500_000 {
		t.Fatalf("mark expires at %d after the renewal, want about an hour from %d", exp2, now)
	}
	// A renewal that does not say the attempt runs leaves the mark to lapse.
	if errs, _ := RenewAll(ctx, c, []Lease{l}, nil, 2*time.Hour); errs[0] != nil {
		t.Fatalf("RenewAll: %v", errs[0])
	}
	if _, exp3 := mark(); exp3 != exp2 {
		t.Fatalf("an unmarked renewal moved the mark's expiry from %d to %d", exp2, exp3)
	}
	// Another token's EndAttempt leaves it; its own deletes it.
	other := l
	other.Generation++
	if err := other.EndAttempt(ctx, c); err != nil {
		t.Fatal(err)
	}
	if tok, _ := mark(); tok != l.Token() {
		t.Fatalf("another token's EndAttempt removed the mark (now %q)", tok)
	}
	for range 2 { // run twice: a resend finds nothing left
		if err := l.EndAttempt(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if c.HExists(ctx, ref.Meta, MetaAttempt).Val() {
		t.Fatal("EndAttempt left the mark")
	}
	if errs, _ := RenewAll(ctx, c, []Lease{l}, []bool{true}, time.Hour); errs[0] != nil || c.HExists(ctx, ref.Meta, MetaAttempt).Val() {
		t.Fatalf("RenewAll of an ended mark: %v, or it wrote a mark", errs[0])
	}
	// A lease lost: the mark is not extended.
	if err := l.BeginAttempt(ctx, c, time.Minute); err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, ref.Key, "p2:1", time.Minute)
	_, before := mark()
	if errs, _ := RenewAll(ctx, c, []Lease{l}, []bool{true}, time.Hour); !errors.Is(errs[0], ErrLeaseLost) {
		t.Fatalf("RenewAll of a lost lease: %v, want ErrLeaseLost", errs[0])
	}
	if _, after := mark(); after != before {
		t.Fatal("RenewAll extended the mark of a lost lease")
	}
}
