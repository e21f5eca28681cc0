package guarantee

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// sharedGroupsRev is the last commit before lease generations' consumer
// groups (issue #42): its engines read every lane through the handler's
// shared group, as the releases before did.
const sharedGroupsRev = "236ff32054f2494d88c11978c9c8d0ff632f357d"

// TestRollingUpgradeToGenerationGroups: two engines of the build before
// generation groups run; two of this build join while events flow and
// the earlier ones stop one by one (SIGTERM), as a rolling deploy does.
// While an earlier engine lives, every lane keeps the shared group (it
// reads it); once none does, the lanes move to their lease generation's
// group, those this build acquired meanwhile too. Order and exclusivity
// hold throughout, nothing runs twice (every handover is graceful), and an
// earlier engine started after the move refuses to run beside this build.
func TestRollingUpgradeToGenerationGroups(t *testing.T) {
	old := earlierBuild(t, sharedGroupsRev)
	c := newCluster(t, ttl)
	c.binaries = map[string]string{"old-1": old, "old-2": old, "old-3": old}
	keys := clientKeys(12)
	round := func(r, ms int) []Step { return roundOf(keys, r, ms) }
	// shared reports whether every lane reads through the shared group;
	// moved, whether every lane reads through its owner's generation
	// group and nothing else.
	groupsOf := func(k string) []string {
		gs, err := c.rdb.XInfoGroups(c.ctx, rdb.PartitionStream(Category, k)).Result()
		if err != nil {
			return nil
		}
		var names []string
		for _, g := range gs {
			names = append(names, g.Name)
		}
		return names
	}
	shared := func() {
		t.Helper()
		for _, k := range keys {
			if gs := groupsOf(k); !slices.Equal(gs, []string{group}) {
				t.Fatalf("%s's groups %v while an earlier engine runs, want the shared group %s alone", k, gs, group)
			}
		}
	}
	const n = 30
	c.start("old-1")
	c.start("old-2")
	c.publish(round(1, 0)...)
	c.waitApplied(30*time.Second, 1, keys...)
	shared()

	for r := 2; r <= n/3; r++ {
		c.publish(round(r, 20)...)
	}
	c.start("new-1")
	c.start("new-2")
	c.waitOwnsSome("new-1", keys)
	c.waitOwnsSome("new-2", keys)
	shared()

	c.signal("old-1", syscall.SIGTERM)
	if err := c.waitExit("old-1", 30*time.Second); err != nil {
		t.Fatalf("old-1 after SIGTERM: %v", err)
	}
	for r := n/3 + 1; r <= 2*n/3; r++ {
		c.publish(round(r, 10)...)
	}
	shared()
	c.signal("old-2", syscall.SIGTERM)
	if err := c.waitExit("old-2", 30*time.Second); err != nil {
		t.Fatalf("old-2 after SIGTERM: %v", err)
	}
	for r := 2*n/3 + 1; r <= n; r++ {
		c.publish(round(r, 5)...)
	}
	var last map[string][]string
	c.eventuallyDescribed(60*time.Second, func() string {
		return fmt.Sprintf("every lane on its owner's generation group (groups: %v)", last)
	}, func() bool {
		last = map[string][]string{}
		ok := true
		for _, k := range keys {
			o, gen := c.owner(k)
			gs := groupsOf(k)
			last[k] = gs
			if !strings.HasPrefix(o, "new-") || !slices.Equal(gs, []string{rdb.GenerationGroup(group, gen)}) {
				ok = false
			}
		}
		return ok
	})
	c.waitApplied(60*time.Second, n, keys...)
	for _, k := range keys {
		if got := c.appliedSeqs(k); len(got) != n {
			t.Errorf("%s applied %v, want 1..%d once each (every handover was graceful)", k, got, n)
		}
		c.checkOrder(k, n)
		c.checkExclusive(k, nil)
	}

	// The earlier build now refuses: it would read the moved lanes
	// through a shared group it creates at the registered start.
	ch := c.spawn("old-3", envChild)
	select {
	case <-ch.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("an earlier engine started after the move still runs:\n%s", tail(ch.log, 40))
	}
	if log := tail(ch.log, 40); ch.err == nil || !strings.Contains(log, "key layout 3") {
		t.Fatalf("an earlier engine started after the move: exit %v, want a refusal naming key layout 3:\n%s", ch.err, log)
	}
}

// earlierBuild returns this suite's test binary built at commit rev of
// the repository the test runs in (git archive, go test -c), kept in the
// OS temp dir under the commit's name so a machine builds it once. Its
// child processes take the same environment as this build's: the harness
// did not change since. Outside a git checkout (a module cache), or in
// one without the commit (a shallow clone), the test is skipped.
func earlierBuild(t *testing.T, rev string) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v): the earlier build comes from the repository's history", err)
	}
	if err := exec.Command("git", "cat-file", "-e", rev+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout (a shallow clone?): %v", rev, err)
	}
	bin := filepath.Join(os.TempDir(), "seqby-guarantee-"+rev+".test")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", strings.TrimSpace(string(top)), rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	tmp := bin + fmt.Sprint(os.Getpid())
	build := exec.Command("go", "test", "-c", "-o", tmp, "./runtime/guarantee")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the guarantee suite at %s: %v\n%s", rev, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
