package inspect

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// HaltRecord is the operator's view of the wire record the engine writes:
// the conversion keeps their fields in step, and this keeps their JSON
// names in step, so seqbyctl -json prints what Redis holds.
func TestHaltRecordJSONMatchesWireRecord(t *testing.T) {
	wire := rdb.HaltRecord{Handler: "h", PM: true, Partition: "p", Category: "c", Key: "k", Stream: "s",
		Streams: []string{"s", "s:backfill"}, EntryID: "1-0", MessageType: "T", MessageID: "m", Reason: "r",
		Error: "e", Owner: "o", Token: "o:1", LeaseKey: "l", At: time.Unix(1, 0).UTC()}
	want, err := json.Marshal(wire)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(HaltRecord(wire))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("inspect.HaltRecord encodes as\n%s\nthe wire record as\n%s", got, want)
	}
}
