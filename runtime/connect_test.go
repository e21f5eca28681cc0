package runtime

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// One URL names a single Redis or a cluster: Connect asks the node.
func TestConnect(t *testing.T) {
	single := redistest.New(t)
	cluster := redistest.NewCluster(t, 3)
	locked := redistest.New(t)
	if _, err := locked.Do("ACL", "SETUSER", "default", "resetpass", ">secret"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, url   string
		wantCluster bool
		wantErr     string // "" for success
	}{
		{"single", "redis://" + single.Addr, false, ""},
		{"single db 2", "redis://" + single.Addr + "/2", false, ""},
		{"cluster node", "redis://" + cluster.Nodes[1].Addr, true, ""},
		{"cluster node with a db", "redis://" + cluster.Nodes[1].Addr + "/2", false, "only database 0"},
		{"not a URL", "127.0.0.1:6379", false, "parse the Redis URL"},
		{"nobody there", "redis://127.0.0.1:1", false, "reach 127.0.0.1:1"},
		{"wrong password", "redis://default:wrong@" + locked.Addr, false, "WRONGPASS"},
		{"right password", "redis://default:secret@" + locked.Addr, false, ""},
		{"cluster pool size kept", "redis://" + cluster.Nodes[0].Addr + "?pool_size=7", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Connect(ctxT(t), tt.url)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Connect: %v, want ErrConnect saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cc, isCluster := c.(*redis.ClusterClient)
			if isCluster != tt.wantCluster {
				t.Fatalf("got %T, want a cluster client: %v", c, tt.wantCluster)
			}
			if isCluster && strings.Contains(tt.url, "pool_size=7") && cc.Options().PoolSize != 7 {
				t.Fatalf("cluster PoolSize %d, want the URL's 7", cc.Options().PoolSize)
			}
			// A write to keys in other slots than the seed's works only
			// through a real cluster client.
			for _, k := range []string{"a", "b", "c", "d"} {
				if err := c.Set(context.Background(), k, "v", 0).Err(); err != nil {
					t.Fatalf("SET %s: %v", k, err)
				}
			}
		})
	}
}

// An empty URL (an unset environment variable, most often) says so and
// what to write instead; go-redis alone says "invalid URL scheme: ".
func TestConnectEmptyURL(t *testing.T) {
	for _, url := range []string{"", " ", "\n"} {
		t.Run(strconv.Quote(url), func(t *testing.T) {
			c, err := Connect(ctxT(t), url)
			if c != nil {
				c.Close()
			}
			if !errors.Is(err, ErrEmptyURL) || !errors.Is(err, ErrConnect) {
				t.Fatalf("Connect(%q): %v, want ErrEmptyURL and ErrConnect", url, err)
			}
			const want = "runtime.Connect: empty Redis URL: set it to redis://host:port (or rediss:// for TLS)"
			if !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Connect(%q): %q, want it to start %q", url, err, want)
			}
		})
	}
}

// A URL with a master_name names sentinels: Connect returns a failover
// client, which follows the primary through a failover.
func TestConnectSentinel(t *testing.T) {
	s := redistest.NewSentinel(t, 1, 2)
	sentinels := s.SentinelAddrs()
	good := "redis://" + sentinels[0] + "?master_name=" + s.Name + "&addr=" + sentinels[1]
	for _, tt := range []struct{ name, url, wantErr string }{
		{"unknown master name", "redis://" + sentinels[0] + "?master_name=nope", "reach the primary \"nope\""},
		{"no sentinel there", "redis://127.0.0.1:1?master_name=" + s.Name, "reach the sentinels 127.0.0.1:1"},
		{"unknown parameter", good + "&colour=blue", "parse the Sentinel URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Connect(ctxT(t), tt.url)
			if c != nil {
				c.Close()
			}
			if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Connect: %v, want ErrConnect saying %q", err, tt.wantErr)
			}
		})
	}
	ctx := ctxT(t)
	c, err := Connect(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	first, _ := s.PrimaryAddr()
	if v, err := s.Node(first).Do("GET", "k"); err != nil || v != "1" {
		t.Fatalf("GET k on the primary %s: %q, %v", first, v, err)
	}
	if _, err := s.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a write through the new primary", func() bool {
		return c.Set(ctx, "k", "2", 0).Err() == nil
	})
	second, _ := s.PrimaryAddr()
	if v, err := s.Node(second).Do("GET", "k"); err != nil || v != "2" {
		t.Fatalf("GET k on the new primary %s: %q, %v", second, v, err)
	}
}
