package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// testStoreVersions checks a StateStore's optimistic version check.
func testStoreVersions(t *testing.T, ctx context.Context, s StateStore) {
	t.Helper()
	data, v, err := s.Load(ctx, "pm", "o-1")
	if err != nil || data != nil || v != 0 {
		t.Fatalf("Load of a new instance = %q, %d, %v; want nil, 0, nil", data, v, err)
	}
	if err := s.Save(ctx, "pm", "o-1", []byte(`{"n":1}`), 0); err != nil {
		t.Fatalf("first Save: %v", err)
	}
	if err := s.Save(ctx, "pm", "o-1", []byte(`{"n":99}`), 0); !errors.Is(err, ErrStateConflict) {
		t.Fatalf("Save at a stale version: %v, want ErrStateConflict", err)
	}
	if err := s.Save(ctx, "pm", "o-1", []byte(`{"n":99}`), 5); !errors.Is(err, ErrStateConflict) {
		t.Fatalf("Save at a future version: %v, want ErrStateConflict", err)
	}
	data, v, err = s.Load(ctx, "pm", "o-1")
	if err != nil || string(data) != `{"n":1}` || v != 1 {
		t.Fatalf("Load = %q, %d, %v; want {\"n\":1}, 1 (a refused save changes nothing)", data, v, err)
	}
	if err := s.Save(ctx, "pm", "o-1", []byte(`{"n":2}`), 1); err != nil {
		t.Fatalf("Save at the current version: %v", err)
	}
	if data, v, _ = s.Load(ctx, "pm", "o-1"); string(data) != `{"n":2}` || v != 2 {
		t.Fatalf("Load = %q, %d; want {\"n\":2}, 2", data, v)
	}
	// Instances are per pm and per correlation value.
	for _, id := range [][2]string{{"pm", "o-2"}, {"other", "o-1"}} {
		if data, v, _ := s.Load(ctx, id[0], id[1]); data != nil || v != 0 {
			t.Fatalf("Load %v = %q, %d; want a new instance", id, data, v)
		}
	}
}

func TestRedisStateStoreVersionCheck(t *testing.T) {
	testStoreVersions(t, ctxT(t), NewRedisStateStore(newRedis(t)))
}

func TestMemoryStateStoreVersionCheck(t *testing.T) {
	testStoreVersions(t, ctxT(t), NewMemoryStateStore())
}

// A save under a pm lease that has passed to a new owner is refused even
// at the current version: the stale owner cannot overwrite the state.
func TestRedisStateStoreSaveFencedByLease(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	s := NewRedisStateStore(c)
	ref := rdb.PMLease("pm", "o-1", nil)
	old, err := rdb.Acquire(ctx, c, ref, "old", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	under := func(l rdb.Lease) context.Context {
		return executor.WithLease(ctx, executor.LeaseInfo{Handler: "pm", Key: "o-1",
			Token: l.Token(), Generation: l.Generation, LeaseKey: l.Ref.Key})
	}
	if err := s.Save(under(old), "pm", "o-1", []byte(`1`), 0); err != nil {
		t.Fatalf("Save under a held lease: %v", err)
	}
	// The lease passes on: released here, as after an expiry.
	if err := old.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	cur, err := rdb.Acquire(ctx, c, ref, "new", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(under(old), "pm", "o-1", []byte(`stale`), 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("Save by the stale owner: %v, want ErrFenced", err)
	}
	if err := s.Save(under(cur), "pm", "o-1", []byte(`2`), 1); err != nil {
		t.Fatalf("Save by the new owner: %v", err)
	}
	if data, v, _ := s.Load(ctx, "pm", "o-1"); string(data) != "2" || v != 2 {
		t.Fatalf("Load = %q, %d; want 2, 2", data, v)
	}
	// A lease of another pm or value in ctx does not fence this instance.
	other := executor.WithLease(ctx, executor.LeaseInfo{Handler: "pm", Key: "o-9", Token: "x:1", LeaseKey: rdb.PMLeaseKey("pm", "o-9")})
	if err := s.Save(other, "pm", "o-1", []byte(`3`), 2); err != nil {
		t.Fatalf("Save with an unrelated lease in ctx: %v", err)
	}
}
