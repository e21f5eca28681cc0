package inspect

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// An Inspector WithHandlerCache answers KnownHandlers from its kept
// answer until the ttl ends, and looks a name it does not know up again
// at once; one without reads each time.
func TestWithHandlerCache(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	plain, cached := New(c), New(c).WithHandlerCache(time.Hour)
	cached.handlers.minFresh = 0 // a missing name reads again however young the answer
	names := func(i *Inspector) []string {
		t.Helper()
		hs, err := i.KnownHandlers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hs {
			out = append(out, h.Name+":"+h.Categories[0])
		}
		return out
	}
	rdb.RegisterGroup(ctx, c, "shop", "h1", false)
	if got := names(cached); !slices.Equal(got, []string{"h1:shop"}) {
		t.Fatalf("first read: %v", got)
	}
	rdb.RegisterGroup(ctx, c, "audit", "h1", false) // sorts before shop
	rdb.RegisterGroup(ctx, c, "shop", "h2", false)
	if got := names(cached); !slices.Equal(got, []string{"h1:shop"}) {
		t.Fatalf("within the ttl: %v, want the kept answer", got)
	}
	if got := names(plain); !slices.Equal(got, []string{"h1:audit", "h2:shop"}) {
		t.Fatalf("without a cache: %v", got)
	}
	if _, err := cached.Handler(ctx, "h2"); err != nil {
		t.Fatalf("a handler registered since: %v", err)
	}
	if got := names(cached); !slices.Equal(got, []string{"h1:audit", "h2:shop"}) {
		t.Fatalf("after the lookup of a new name: %v", got)
	}
	if _, err := cached.Handler(ctx, "h3"); !errors.Is(err, ErrUnknownHandler) {
		t.Fatalf("an unknown handler: %v", err)
	}
	// A missing name does not read again while the answer is younger
	// than minFresh.
	cached.handlers.minFresh = time.Hour
	rdb.RegisterGroup(ctx, c, "shop", "h4", false)
	if _, err := cached.Handler(ctx, "h4"); !errors.Is(err, ErrUnknownHandler) {
		t.Fatalf("a name registered within minFresh: %v, want the kept answer's ErrUnknownHandler", err)
	}
	// What a caller gets is its own.
	hs, _ := cached.KnownHandlers(ctx)
	hs[0].Categories[0] = "changed"
	if got := names(cached); got[0] != "h1:audit" {
		t.Fatalf("a caller's change reached the cache: %v", got)
	}
}
