package outbox

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A partition whose rows hold the same key bytes, some as TEXT and some
// as BLOB (SQLite stores either in a TEXT column): groupOf and the hex
// set see one partition, row_number() two.
func TestRowNumberBlobKeyIsOneGroup(t *testing.T) {
	for _, viaRetry := range []bool{false, true} {
		name := map[bool]string{false: "fetch", true: "fetchHeads"}[viaRetry]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sp := &switchPublisher{}
			db, r, l := leadingRelay(t, SQLite, sp, RelayOptions{BatchSize: 2})
			ins := func(id string, key any) {
				t.Helper()
				if _, err := db.ExecContext(ctx, `INSERT INTO seqby_outbox
(message_id, category, partition_key, partitioned, backfill, type, payload) VALUES (?, 'c', ?, 1, 0, 't', x'7b7d')`, id, key); err != nil {
					t.Fatal(err)
				}
			}
			ins("k1", "a")
			ins("k2", "a")
			ins("k3", []byte("a")) // same bytes, stored as a BLOB
			if viaRetry {
				r.backoff[group{partitioned: true, category: "c", key: "a"}] = &partBackoff{fails: 1, until: time.Now().Add(-time.Second)}
			}
			if _, err := r.round(ctx, l); err != nil {
				t.Fatal(err)
			}
			got := sp.published["a"]
			if !slices.Equal(got, []string{"k1", "k2"}) && !slices.Equal(got, []string{"k1"}) && !slices.Equal(got, []string{"k1", "k2", "k3"}) {
				t.Errorf("published %q: k3 before k2, out of order", got)
			}
		})
	}
}

// An unpartitioned category and a partitioned empty key of it are two groups
// (groupOf); both due, each one's head is retried, neither entry is
// dropped as having nothing pending.
func TestRowNumberLaneFlagHeads(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			ctx := context.Background()
			db, r, _ := leadingRelay(t, d, &switchPublisher{}, RelayOptions{})
			for _, m := range []struct {
				id string
				p  bool
			}{{"u1", false}, {"p1", true}} {
				if _, err := db.ExecContext(ctx, r.d.rebind(`INSERT INTO seqby_outbox
(message_id, category, partition_key, partitioned, backfill, type, payload) VALUES (?, 'c', '', ?, ?, 't', ?)`), m.id, m.p, false, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			heads, err := r.fetchHeads(ctx, []group{{category: "c"}, {partitioned: true, category: "c"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(heads) != 2 {
				t.Errorf("heads of 2 groups: %d", len(heads))
			}
		})
	}
}
