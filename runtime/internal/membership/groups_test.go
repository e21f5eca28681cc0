package membership

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// GenGroups opens only when every live instance on the handler's
// categories reads through generation groups, and only after the
// handler's control hash is marked and this instance's record says
// rdb.GenGroupsLayout; a restarted instance records that layout from its
// start.
func TestGenGroupsGate(t *testing.T) {
	builds := []Build{{Name: "orders", Kind: KindKeyed, Routes: []Route{{Category: "order", Type: "Placed"}}}}
	start := func(t *testing.T, c redis.UniversalClient, owner string) *Instance {
		t.Helper()
		ctx := ctxT(t)
		in := newInstance(c, owner)
		if err := in.ClaimOwner(ctx); err != nil {
			t.Fatal(err)
		}
		if err := in.RegisterDeploy(ctx, builds); err != nil {
			t.Fatal(err)
		}
		return in
	}
	layoutOf := func(t *testing.T, c redis.UniversalClient, owner string) int {
		t.Helper()
		recs, err := rdb.DeployRecords(ctxT(t), c, "orders", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Owner == owner {
				return r.Layout
			}
		}
		t.Fatalf("no record of %s", owner)
		return 0
	}
	// earlier writes a live record of the build before generation groups
	// (no gen_groups in its data), as that build's RegisterDeploy does.
	earlier := func(t *testing.T, c redis.UniversalClient, owner string) {
		t.Helper()
		ctx := ctxT(t)
		inc := NewIncarnation(owner)
		if err := c.Set(ctx, rdb.OwnerKey(owner), inc, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if _, conflict, err := rdb.RecordDeploy(ctx, c, "orders", owner, KindKeyed, rdb.Layout, "b0", `{"incarnation":"`+inc+`"}`, nil, nil); err != nil || conflict != nil {
			t.Fatalf("earlier record: %+v, %v", conflict, err)
		}
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, c redis.UniversalClient, ctx context.Context)
		want  bool
	}{
		{"this build alone", nil, true},
		{"an earlier build live", func(t *testing.T, c redis.UniversalClient, ctx context.Context) {
			earlier(t, c, "old")
		}, false},
		// Its OwnerID key lost for a while: the record counts as dead, but
		// the member is live and will record itself again.
		{"an earlier build's member with a dead record", func(t *testing.T, c redis.UniversalClient, ctx context.Context) {
			earlier(t, c, "old")
			if _, err := rdb.Announce(ctx, c, "orders", "old", time.Minute, true); err != nil {
				t.Fatal(err)
			}
			c.Del(ctx, rdb.OwnerKey("old"))
		}, false},
		{"an earlier build of another handler on the category", func(t *testing.T, c redis.UniversalClient, ctx context.Context) {
			if _, err := rdb.RegisterGroup(ctx, c, "order", "audit", false); err != nil {
				t.Fatal(err)
			}
			inc := NewIncarnation("old")
			c.Set(ctx, rdb.OwnerKey("old"), inc, time.Minute)
			if _, conflict, err := rdb.RecordDeploy(ctx, c, "audit", "old", KindKeyed, rdb.Layout, "b0", `{"incarnation":"`+inc+`"}`, nil, nil); err != nil || conflict != nil {
				t.Fatalf("earlier record: %+v, %v", conflict, err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ctx := newRedis(t), ctxT(t)
			if _, err := rdb.RegisterGroup(ctx, c, "order", "orders", false); err != nil {
				t.Fatal(err)
			}
			in := start(t, c, "new")
			if tt.setup != nil {
				tt.setup(t, c, ctx)
			}
			if got := in.GenGroups(ctx, "orders"); got != tt.want {
				t.Fatalf("GenGroups = %v, want %v", got, tt.want)
			}
			marked, err := rdb.GenGroupsMarked(ctx, c, "orders")
			if err != nil {
				t.Fatal(err)
			}
			want := rdb.Layout
			if tt.want {
				want = rdb.GenGroupsLayout
			}
			if l := layoutOf(t, c, "new"); marked != tt.want || l != want {
				t.Fatalf("marked %v, record's layout %d; want %v, %d", marked, l, tt.want, want)
			}
		})
	}

	// A write that fails keeps the gate closed, and the next answer
	// writes it.
	t.Run("failed write", func(t *testing.T) {
		c, ctx := newRedis(t), ctxT(t)
		if _, err := rdb.RegisterGroup(ctx, c, "order", "orders", false); err != nil {
			t.Fatal(err)
		}
		in := start(t, c, "new")
		done, cancel := context.WithCancel(ctx)
		cancel()
		if in.moveRecords(done, "orders") {
			t.Fatal("moveRecords with a cancelled context reports the record moved")
		}
		if in.GenGroups(ctx, "orders") && layoutOf(t, c, "new") != rdb.GenGroupsLayout {
			t.Fatal("GenGroups opened with this instance's record on the earlier layout")
		}
		if l := layoutOf(t, c, "new"); l != rdb.GenGroupsLayout {
			t.Fatalf("record's layout %d after the gate opened, want %d", l, rdb.GenGroupsLayout)
		}
	})

	// A restarted instance (a new Instance) records the later layout at
	// once, its handler's control hash being marked.
	t.Run("restart", func(t *testing.T) {
		c, ctx := newRedis(t), ctxT(t)
		if _, err := rdb.RegisterGroup(ctx, c, "order", "orders", false); err != nil {
			t.Fatal(err)
		}
		in := start(t, c, "new")
		if !in.GenGroups(ctx, "orders") {
			t.Fatal("GenGroups closed for this build alone")
		}
		in.ReleaseOwner(ctx)
		start(t, c, "new")
		if l := layoutOf(t, c, "new"); l != rdb.GenGroupsLayout {
			t.Fatalf("a restarted instance records layout %d, want %d", l, rdb.GenGroupsLayout)
		}
	})
}
