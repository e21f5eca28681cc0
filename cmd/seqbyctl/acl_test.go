package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
)

// aclDoc is where the ACL users are documented.
const aclDoc = "../../docs/operating.md"

// documentedACL reads the documented "ACL SETUSER seqbyctl" rules, with
// PASSWORD and "~CATEGORY ~CATEGORY:*" filled in for category.
func documentedACL(t *testing.T, password, category string) []string {
	t.Helper()
	doc, err := os.ReadFile(aclDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ACL SETUSER seqbyctl (.*)$`).FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s has no line ACL SETUSER seqbyctl ...", aclDoc)
	}
	var rules []string
	for _, r := range strings.Fields(string(m[1])) {
		switch r {
		case ">PASSWORD":
			r = ">" + password
		case "~CATEGORY":
			r = "~" + category
		case "~CATEGORY:*":
			r = "~" + category + ":*"
		}
		rules = append(rules, r)
	}
	return rules
}

// Every command runs under the documented seqbyctl ACL user, on a single
// Redis and on a cluster, and Redis refuses nothing (its ACL LOG stays
// empty). runtime's ACL test covers the engine's user.
func TestCommandsUnderDocumentedACL(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		s := redistest.New(t)
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		t.Cleanup(func() { c.Close() })
		commandsUnderACL(t, c, []*redistest.Server{s})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.NewCluster(t, 3)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
		t.Cleanup(func() { c.Close() })
		commandsUnderACL(t, c, cl.Nodes)
	})
}

func commandsUnderACL(t *testing.T, c redis.UniversalClient, servers []*redistest.Server) {
	ctx := context.Background()
	for _, s := range servers {
		if _, err := s.Do(append([]string{"ACL", "SETUSER", "seqbyctl"}, documentedACL(t, "ctl-secret", "shop")...)...); err != nil {
			t.Fatalf("ACL SETUSER seqbyctl: %v", err)
		}
		if _, err := s.Do("ACL", "LOG", "RESET"); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("REDIS_URL", "redis://seqbyctl:ctl-secret@"+servers[len(servers)-1].Addr)
	startHalting(t, c)
	pub := runtime.NewPublisher(c)
	for _, m := range []*placed{{Client: "a", Seq: 1, Poison: true}, {Client: "b", Seq: 1, Poison: true}, {Client: "d", Seq: 1, Poison: true}} {
		if err := pub.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	var head = map[string]string{}
	for _, k := range []string{"a", "b", "d"} {
		head[k] = c.XRange(ctx, "shop:{"+k+"}", "-", "+").Val()[0].ID
	}
	eventually(t, 20*time.Second, "three halts", func() bool {
		var out bytes.Buffer
		run([]string{"halted", "-json"}, &out, &bytes.Buffer{})
		return strings.Count(out.String(), `"entry_id"`) == 3
	})
	dlqID := func(key string) string {
		ms := c.XRange(ctx, "shop:{"+key+"}:dlq", "-", "+").Val()
		if len(ms) == 0 {
			t.Fatalf("shop:{%s}:dlq is empty", key)
		}
		return ms[0].ID
	}
	steps := []struct {
		args []string
		code int
	}{
		{[]string{"halted"}, 1},
		{[]string{"halted", "-handler", "ops"}, 1},
		{[]string{"partitions", "-handler", "ops"}, 0},
		{[]string{"inspect", "-handler", "ops", "-stream", "shop:{a}"}, 0},
		{[]string{"inspect", "-handler", "ops", "-stream", "shop:{zz}"}, 1},
		{[]string{"state", "-handler", "ops", "-value", "a"}, 1}, // ops is keyed: no pm state, but read
		{[]string{"skip", "-handler", "ops", "-stream", "shop:{a}", "-id", head["a"], "-dry-run"}, 0},
		{[]string{"skip", "-handler", "ops", "-stream", "shop:{a}", "-id", head["a"]}, 0},
		{[]string{"inspect", "-handler", "ops", "-category", "shop", "-stream", "a"}, 0}, // not halted: keyed or a pm's?
		{[]string{"dlq", "-handler", "ops", "-stream", "shop:{b}", "-id", head["b"], "-dry-run"}, 0},
		{[]string{"dlq", "-handler", "ops", "-stream", "shop:{b}", "-id", head["b"]}, 0},
		{[]string{"dlq", "-handler", "ops", "-stream", "shop:{d}", "-id", head["d"]}, 0},
		{[]string{"dlq", "list"}, 0},
		{[]string{"dlq", "list", "-handler", "ops"}, 0},
		{[]string{"dlq", "replay", "-stream", "shop:{b}:dlq", "-id", "<b>", "-dry-run"}, 0},
		{[]string{"dlq", "replay", "-stream", "shop:{b}:dlq", "-id", "<b>"}, 0},
		{[]string{"dlq", "drop", "-stream", "shop:{d}:dlq", "-id", "<d>", "-dry-run"}, 0},
		{[]string{"dlq", "drop", "-stream", "shop:{d}:dlq", "-id", "<d>"}, 0},
		{[]string{"dlq", "drop", "-stream", "shop:{d}:dlq", "-id", "1-1"}, 1},
		{[]string{"pause", "-handler", "ops", "-stream", "shop:{a}", "-dry-run"}, 0},
		{[]string{"pause", "-handler", "ops", "-stream", "shop:{a}"}, 0},
		{[]string{"paused"}, 1},
		{[]string{"paused", "-handler", "ops"}, 1},
		{[]string{"resume", "-handler", "ops", "-stream", "shop:{a}", "-dry-run"}, 0},
		{[]string{"resume", "-handler", "ops", "-stream", "shop:{a}"}, 0},
		{[]string{"pause", "-handler", "ops", "-all"}, 0},
		{[]string{"resume", "-handler", "ops", "-all"}, 0},
		{[]string{"paused"}, 0},
		{[]string{"audit"}, 0},
	}
	ids := map[string]string{}
	for _, s := range steps {
		args := append([]string{}, s.args...)
		for i, a := range args {
			if k, ok := strings.CutPrefix(a, "<"); ok {
				k = strings.TrimSuffix(k, ">")
				if ids[k] == "" {
					ids[k] = dlqID(k)
				}
				args[i] = ids[k]
			}
		}
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != s.code {
			t.Fatalf("seqbyctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, s.code, out.String(), errb.String())
		}
		if strings.Contains(errb.String(), "NOPERM") {
			t.Fatalf("seqbyctl %s was refused: %s", strings.Join(args, " "), errb.String())
		}
	}
	if n := c.XLen(ctx, "seqby:__audit__").Val(); n != 9 {
		t.Fatalf("the audit stream has %d entries, want 9 (skip, 2 dlq moves, replay, drop, 2 pauses, 2 resumes)", n)
	}
	for _, s := range servers {
		admin := redis.NewClient(&redis.Options{Addr: s.Addr})
		log, err := admin.Do(ctx, "ACL", "LOG").Slice()
		admin.Close()
		if err != nil || len(log) > 0 {
			t.Fatalf("ACL LOG of %s: %v, %v; want nothing refused", s.Addr, log, err)
		}
	}
}
