package rdb

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RecordDeploy removes the dead records it is given (only if unchanged),
// refuses another kind, judges members without a record by their class,
// and gives a build the since of its live records.
func TestRecordDeploy(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	rec := func(owner, kind, build string, dead []DeployRecord, bare map[string]string) (int64, *DeployConflict) {
		t.Helper()
		since, conflict, err := RecordDeploy(ctx, c, "h", owner, kind, build, `{"x":"|y|"}`, dead, bare)
		if err != nil {
			t.Fatal(err)
		}
		return since, conflict
	}
	s1, conflict := rec("a", "keyed", "b1", nil, nil)
	if conflict != nil || s1 == 0 {
		t.Fatalf("first record: since %d, conflict %+v", s1, conflict)
	}
	if s, conflict := rec("b", "keyed", "b1", nil, nil); conflict != nil || s != s1 {
		t.Fatalf("same build: since %d, conflict %+v; want the first one's since %d", s, conflict, s1)
	}
	s2, conflict := rec("c", "keyed", "b2", nil, nil)
	if conflict != nil || s2 < s1 {
		t.Fatalf("a newer build: since %d (first %d), conflict %+v", s2, s1, conflict)
	}
	if _, conflict := rec("d", "unkeyed", "b3", nil, nil); conflict == nil || conflict.Kind != "keyed" {
		t.Fatalf("another kind: conflict %+v, want a keyed one", conflict)
	}
	recs, err := DeployRecords(ctx, c, "h", "b1")
	if err != nil || len(recs) != 1 || recs[0].Owner != "c" || recs[0].Data != `{"x":"|y|"}` || recs[0].Kind != "keyed" {
		t.Fatalf("records but b1: %+v, %v", recs, err)
	}
	all, err := DeployRecords(ctx, c, "h", "")
	if err != nil || len(all) != 3 {
		t.Fatalf("all records: %+v, %v", all, err)
	}
	// A stale copy of a record is not removed; the current one is.
	stale := all[0]
	stale.Raw += "x"
	if _, conflict := rec("e", "unkeyed", "b3", []DeployRecord{stale}, nil); conflict == nil {
		t.Fatal("a stale copy of a dead record removed it")
	}
	if s, conflict := rec("e", "unkeyed", "b3", all, nil); conflict != nil || s < s2 {
		t.Fatalf("with the keyed ones dead: since %d, conflict %+v", s, conflict)
	}
	if _, conflict := rec("f", "unkeyed", "b3", nil, map[string]string{"old": "leased"}); conflict == nil || conflict.Owner != "old" {
		t.Fatalf("a leased member without a record: conflict %+v", conflict)
	}
	if _, conflict := rec("f", "unkeyed", "b3", nil, map[string]string{"old": "shared", "e": "leased"}); conflict != nil {
		t.Fatalf("a shared member, and a leased guess about one with a record: conflict %+v", conflict)
	}
}

// This layout's deploy records make an engine of the previous release,
// started beside them, refuse: its deploy_record.lua (testdata/layout1,
// as that release shipped it) sees another kind than its own in the
// tagged field. And a record of that release, or of a member without
// one, makes RecordDeploy report the other layout.
func TestDeployLayouts(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	src, err := os.ReadFile("testdata/layout1/deploy_record.lua")
	if err != nil {
		t.Fatal(err)
	}
	old := redis.NewScript(string(src))
	if _, conflict, err := RecordDeploy(ctx, c, "h", "new", "keyed", "b1", `{"incarnation":"new~1"}`, nil, nil); err != nil || conflict != nil {
		t.Fatalf("record: %+v, %v", conflict, err)
	}
	res, err := old.Run(ctx, c, []string{DeployKey("h")}, "old", "keyed", "b1", `{"incarnation":"old~1"}`, 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0] != int64(0) || res[1] != "new" || res[2] != RecordedKind("keyed") {
		t.Fatalf("the previous release's script: %v, want a refusal naming %q as another kind", res, RecordedKind("keyed"))
	}
	recs, err := DeployRecords(ctx, c, "h", "")
	if err != nil || len(recs) != 1 || recs[0].Kind != "keyed" || recs[0].Layout != Layout {
		t.Fatalf("records: %+v, %v", recs, err)
	}
	// A record as the previous release writes it.
	if err := c.HSet(ctx, DeployKey("h2"), "old", `v1|keyed|1|b1|{"incarnation":"old~1"}`).Err(); err != nil {
		t.Fatal(err)
	}
	recs, err = DeployRecords(ctx, c, "h2", "")
	if err != nil || len(recs) != 1 || recs[0].Kind != "keyed" || recs[0].Layout != 1 {
		t.Fatalf("the previous release's record: %+v, %v", recs, err)
	}
	_, conflict, err := RecordDeploy(ctx, c, "h2", "new", "keyed", "b1", `{"incarnation":"new~1"}`, nil, nil)
	if err != nil || conflict == nil || conflict.Owner != "old" || conflict.Kind != "keyed" || conflict.Layout != 1 {
		t.Fatalf("beside a record of layout 1: %+v, %v", conflict, err)
	}
}
