package rdb

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// layout is the key layout built by the functions, with placeholders for
// the names, in the order the documentation lists it.
func layout() []string {
	stream := PartitionStream("category", "key")
	return []string{
		stream,
		BackfillStream("category", "key", DefaultBackfillSuffix),
		DLQStream("category", "key"),
		DLQOpKey(DLQStream("category", "key"), "id"),
		LeaseKey(stream, "handler"),
		MetaKey(LeaseKey(stream, "handler")),
		WakeKey(stream),
		DedupKey("category", "key", "id"),
		PlainDedupKey("category", "id"),
		"category", // an unpartitioned category's stream is its name
		IndexKey("category"),
		SignalKey("category"),
		FanoutKey("category"),
		GroupsKey("category"),
		ReapingKey("category"),
		MaintenanceLease().Key,
		MaintenanceLease().Meta,
		ReapCategoriesKey,
		PMLeaseKey("pm", "value"),
		StateKey("pm", "value"),
		MembersKey("handler"),
		OwnerKey("owner"),
		taggedBarrierKey("tag") + ":nonce",
		OwnerSignalKey("incarnation"),
		DeployKey("handler"),
		MarksKey("handler"),
		ControlKey("handler"),
		AuditKey,
	}
}

// The key layout is written down twice: in this package's doc (next to
// the code that builds it) and in docs/runtime.md (the README links
// there). Each must list exactly the keys the functions build, in the
// same order.
func TestLayoutTablesAgree(t *testing.T) {
	want := layout()
	if MetaKey(PMLeaseKey("pm", "value")) != StateKey("pm", "value") {
		t.Errorf("a pm lease's control hash is %s, want its state hash", MetaKey(PMLeaseKey("pm", "value")))
	}
	if diff := cmp.Diff(want, docKeys(t)); diff != "" {
		t.Errorf("the package doc's layout table differs from the keys built (-built +doc):\n%s", diff)
	}
	for _, md := range []string{"../../../docs/runtime.md"} {
		if diff := cmp.Diff(want, markdownKeys(t, md)); diff != "" {
			t.Errorf("%s's key layout table differs from the keys built (-built +%s):\n%s", md, md, diff)
		}
	}
}

// docKeys reads the first column of the layout table in doc.go.
func docKeys(t *testing.T) []string {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "//\tkey "):
			in = true
		case in && strings.HasPrefix(line, "//\t"):
			keys = append(keys, strings.Fields(strings.TrimPrefix(line, "//\t"))[0])
		case in:
			return keys
		}
	}
	return keys
}

var mdKey = regexp.MustCompile("^\\| `([^`]+)` \\|")

// markdownKeys reads the first column of the "Redis key layout" table.
func markdownKeys(t *testing.T, path string) []string {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(src), "# Redis key layout\n")
	if !ok {
		t.Fatalf("%s has no Redis key layout section", path)
	}
	var keys []string
	for _, line := range strings.Split(after, "\n") {
		if m := mdKey.FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		} else if len(keys) > 0 && !strings.HasPrefix(line, "|") {
			break
		}
	}
	return keys
}
