package redistest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Refusal fails the commands armed, as many times as armed, and lets
// every other command through to Redis.
func TestRefusalFailsOnlyWhatIsArmed(t *testing.T) {
	s := New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var r Refusal
	c.AddHook(&r)
	refused := errors.New("LOADING Redis is loading the dataset in memory")
	r.Arm(func(args []string) bool { return strings.EqualFold(args[0], "get") && args[1] == "a" }, refused, 2)
	for i := range 3 {
		err := c.Get(ctx, "a").Err()
		if want := i < 2; errors.Is(err, refused) != want {
			t.Fatalf("GET a #%d: %v; refused want %v", i+1, err, want)
		}
	}
	if err := c.Get(ctx, "b").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET b: %v; want it sent (redis.Nil)", err)
	}
	r.Arm(func(args []string) bool { return strings.EqualFold(args[0], "set") }, refused, -1)
	for range 3 {
		if err := c.Set(ctx, "a", "1", 0).Err(); !errors.Is(err, refused) {
			t.Fatalf("SET while armed for good: %v", err)
		}
	}
	r.Disarm()
	if err := c.Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatalf("SET after Disarm: %v", err)
	}
	if r.Refused() != 5 {
		t.Fatalf("Refused %d; want 5", r.Refused())
	}
}
