package rdb

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RecordDeploy removes the dead records it is given (only if unchanged),
// refuses another kind, judges members without a record by their class,
// and gives a build the since of its live records.
func TestRecordDeploy(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	rec := func(owner, kind, build string, dead []DeployRecord, bare map[string]string) (int64, *DeployConflict) {
		t.Helper()
		since, conflict, err := RecordDeploy(ctx, c, "h", owner, kind, Layout, build, `{"x":"|y|"}`, dead, bare)
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
	if _, conflict, err := RecordDeploy(ctx, c, "h", "new", "keyed", Layout, "b1", `{"incarnation":"new~1"}`, nil, nil); err != nil || conflict != nil {
		t.Fatalf("record: %+v, %v", conflict, err)
	}
	res, err := old.Run(ctx, c, []string{DeployKey("h")}, "old", "keyed", "b1", `{"incarnation":"old~1"}`, 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0] != int64(0) || res[1] != "new" || res[2] != RecordedKind("keyed", Layout) {
		t.Fatalf("the previous release's script: %v, want a refusal naming %q as another kind", res, RecordedKind("keyed", Layout))
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
	_, conflict, err := RecordDeploy(ctx, c, "h2", "new", "keyed", Layout, "b1", `{"incarnation":"new~1"}`, nil, nil)
	if err != nil || conflict == nil || conflict.Owner != "old" || conflict.Kind != "keyed" || conflict.Layout != 1 {
		t.Fatalf("beside a record of layout 1: %+v, %v", conflict, err)
	}
}

// An instance's owned count lives in its handler's control hash until
// its expiry: read while it lasts, not after, dropped by the next record
// of any instance, and the same when written twice.
func TestOwnedRecords(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	if err := LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	for range 2 { // run twice: a resend writes the same record
		if err := AnnounceAll(ctx, c, []string{"h"}, []int{3}, "a", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := AnnounceAll(ctx, c, []string{"h"}, []int{4}, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	sum, complete, err := OwnedByOthers(ctx, c, "h", "self", map[string]bool{"a": true, "b": true, "self": true})
	if err != nil || !complete || sum != 7 {
		t.Fatalf("OwnedByOthers = %d, %v, %v; want 7, complete", sum, complete, err)
	}
	// a's record expired (its engine killed): not counted, and dropped by
	// b's next heartbeat.
	c.HSet(ctx, ControlKey("h"), "owned:a", "1 3")
	if _, complete, _ := OwnedByOthers(ctx, c, "h", "self", map[string]bool{"a": true, "b": true}); complete {
		t.Fatal("an expired record counted")
	}
	rec, err := OwnedRecorded(ctx, c, "h", []string{"a", "b"})
	if err != nil || rec["a"] || !rec["b"] {
		t.Fatalf("OwnedRecorded = %v, %v; want b only", rec, err)
	}
	if err := AnnounceAll(ctx, c, []string{"h"}, []int{4}, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if c.HExists(ctx, ControlKey("h"), "owned:a").Val() {
		t.Fatal("the expired record was not dropped")
	}
	// An earlier release's count (its own key) still says the instance lives.
	c.Set(ctx, legacyOwnedKey("h", "old"), "2", time.Minute)
	if rec, _ := OwnedRecorded(ctx, c, "h", []string{"old"}); !rec["old"] {
		t.Fatal("an earlier release's owned count not read")
	}
}

// An instance's faults live in each handler's control hash while it has
// some: read back per owner, cleared per handler, an expired record
// ignored, and an earlier release's report (its own key) read too.
func TestFaultRecords(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	f := func(h, key string) FaultReport {
		return FaultReport{Kind: "unowned", Handler: h, Category: "o", Key: key, Stream: PartitionStream("o", key), Since: time.Now().UTC().Truncate(time.Second)}
	}
	by := map[string][]FaultReport{"h1": {f("h1", "a"), f("h1", "b")}, "h2": {f("h2", "c")}}
	for range 2 { // run twice: the same records
		if err := ReportFaults(ctx, c, "w1", by, nil, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	keys := func() []string {
		fs, err := Faults(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fs {
			out = append(out, f.Owner+" "+f.Handler+" "+f.Key)
		}
		slices.Sort(out)
		return out
	}
	if got := keys(); !slices.Equal(got, []string{"w1 h1 a", "w1 h1 b", "w1 h2 c"}) {
		t.Fatalf("Faults = %v", got)
	}
	// h2's faults went: its record goes; w2's expired record counts not.
	if err := ReportFaults(ctx, c, "w1", map[string][]FaultReport{"h1": by["h1"]}, []string{"h2"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	c.HSet(ctx, ControlKey("h1"), "faults:w2", `1 [{"kind":"unowned","handler":"h1","key":"z"}]`)
	c.Set(ctx, legacyFaultsKey("old"), `[{"kind":"released","handler":"h9","key":"y"}]`, time.Minute)
	if got := keys(); !slices.Equal(got, []string{"old h9 y", "w1 h1 a", "w1 h1 b"}) {
		t.Fatalf("Faults after clearing h2 = %v", got)
	}
}

// Records of GenGroupsLayout make an engine of the build before it
// (layout 2, shared consumer groups: testdata/layout2, its
// deploy_record.lua as it shipped) refuse to start, while records of
// Layout do not; this build records beside records of either.
func TestDeployGenGroupsLayout(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	src, err := os.ReadFile("testdata/layout2/deploy_record.lua")
	if err != nil {
		t.Fatal(err)
	}
	earlier := redis.NewScript(string(src))
	tests := []struct {
		name   string
		layout int
		refuse bool
	}{
		{"shared groups", Layout, false},
		{"generation groups", GenGroupsLayout, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "h-" + strconv.Itoa(tt.layout)
			if _, conflict, err := RecordDeploy(ctx, c, key, "new", "keyed", tt.layout, "b1", `{"incarnation":"new~1"}`, nil, nil); err != nil || conflict != nil {
				t.Fatalf("record: %+v, %v", conflict, err)
			}
			res, err := earlier.Run(ctx, c, []string{DeployKey(key)}, "old", RecordedKind("keyed", Layout), "b0", `{"incarnation":"old~1"}`, 0).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if refused := res[0] == int64(0); refused != tt.refuse {
				t.Fatalf("the earlier build's script: %v, want refused %v", res, tt.refuse)
			}
			if tt.refuse && res[2] != RecordedKind("keyed", GenGroupsLayout) {
				t.Fatalf("the refusal names %q, want the layout's tag", res[2])
			}
			// This build runs beside either: a record of the other layout
			// is no conflict, nor is one of the build before.
			other := Layout + GenGroupsLayout - tt.layout
			_, conflict, err := RecordDeploy(ctx, c, key, "new2", "keyed", other, "b1", `{"incarnation":"new2~1"}`, nil, nil)
			if err != nil || conflict != nil {
				t.Fatalf("a record of layout %d beside one of %d: %+v, %v", other, tt.layout, conflict, err)
			}
			recs, err := DeployRecords(ctx, c, key, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if !Compatible(r.Layout) {
					t.Errorf("record %+v: layout %d not compatible", r, r.Layout)
				}
			}
		})
	}
}
