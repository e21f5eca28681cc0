package rdb

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A dead-letter entry whose head was itself a replay is replayed with
// fresh replay_* fields: MessageFields leaves the earlier ones out (they
// are no trace context), and ParseReplayed reads what Replayed wrote.
func TestReplayFields(t *testing.T) {
	dlq := map[string]string{
		FieldType: "T", FieldID: "m-1", FieldPayload: "{}", FieldPublishedAt: "2024-01-01T00:00:00Z",
		"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		// The head was a replay of 1-0, dead-lettered by h as 5-0.
		ReplayFieldOf: "1-0", ReplayFieldStream: "shop:{a}", ReplayFieldDLQ: "shop:{a}:dlq", ReplayFieldDLQID: "5-0", ReplayFieldHandler: "h",
		DLQFieldStream: "shop:{a}", DLQFieldEntryID: "7-0", DLQFieldHandler: "g",
	}
	want := []any{FieldType, "T", FieldID, "m-1", FieldPayload, "{}", FieldPublishedAt, "2024-01-01T00:00:00Z",
		"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	if diff := cmp.Diff(want, MessageFields(dlq)); diff != "" {
		t.Fatalf("MessageFields kept an earlier replay's fields (-want +got):\n%s", diff)
	}
	for _, name := range []string{ReplayFieldOf, ReplayFieldDLQID, ReplayFieldPrefix + "anything"} {
		if !OwnField(name) {
			t.Errorf("OwnField(%q) = false: a trace propagator's field of that name would be written", name)
		}
	}
	if OwnField("traceparent") {
		t.Error("OwnField(traceparent)")
	}

	r := Replayed{Of: "7-0", Stream: "shop:{a}:backfill", DLQ: "shop:{a}:dlq", DLQID: "9-0", Handler: "g"}
	entry := map[string]string{}
	f := r.Fields()
	for i := 0; i < len(f); i += 2 {
		entry[f[i].(string)] = f[i+1].(string)
	}
	if got, ok := ParseReplayed(entry); !ok || got != r {
		t.Fatalf("ParseReplayed(%v) = %+v, %v; want %+v", entry, got, ok, r)
	}
	if _, ok := ParseReplayed(map[string]string{FieldID: "m-1"}); ok {
		t.Fatal("an entry without replay fields parsed as a replay")
	}
}
