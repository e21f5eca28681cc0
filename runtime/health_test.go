package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// TestHealthUnreadyWhenRedisStops: ready once running; when Redis is
// killed, not ready (the engine is still live: a restart would not help);
// ready again after Redis comes back; not live after Run returns.
func TestHealthUnreadyWhenRedisStops(t *testing.T) {
	s := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	if err := NewPublisher(c).Publish(ctx, ev("k", 1)); err != nil {
		t.Fatal(err)
	}
	r := startEngine(t, c, fastOptions("health-1"), keyedHandler("health", func(context.Context, *testEvent) error { return nil }))
	srv := httptest.NewServer(r.HealthHandler())
	t.Cleanup(srv.Close)
	get := func(query string) (int, Health) {
		resp, err := http.Get(srv.URL + "/healthz" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h Health
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, h
	}

	eventually(t, 10*time.Second, "ready", func() bool { return r.Health(ctx).Ready })
	if code, h := get(""); code != http.StatusOK || !h.Ready || !h.Live || len(h.Reasons) != 0 {
		t.Fatalf("ready engine: %d %+v", code, h)
	}

	s.Kill()
	eventually(t, 10*time.Second, "unready with Redis down", func() bool { return !r.Health(ctx).Ready })
	code, h := get("")
	if code != http.StatusServiceUnavailable || h.Ready || !h.Live || h.Redis == "ok" ||
		!strings.Contains(strings.Join(h.Reasons, "\n"), "redis does not answer") {
		t.Fatalf("Redis down: %d %+v", code, h)
	}
	if code, _ := get("?live"); code != http.StatusOK {
		t.Fatalf("liveness with Redis down: %d, want 200", code)
	}

	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "ready again", func() bool { return r.Health(ctx).Ready })

	r.stop()
	if h := r.Health(ctx); h.Live || h.Ready {
		t.Fatalf("after Run returned: %+v", h)
	}
	if code, _ := get("?live"); code != http.StatusServiceUnavailable {
		t.Fatalf("liveness after Run returned: %d, want 503", code)
	}
}
