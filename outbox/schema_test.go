package outbox_test

import (
	"os"
	"strings"
	"testing"

	"github.com/seqby/seqby/outbox"
)

// TestDocsShowTheSchema: docs/outbox.md shows exactly the SQL Schema
// returns, for both dialects.
func TestDocsShowTheSchema(t *testing.T) {
	doc, err := os.ReadFile("../docs/outbox.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.SQLite} {
		if !strings.Contains(string(doc), "```sql\n"+outbox.Schema(d)+"```") {
			t.Errorf("docs/outbox.md does not show outbox.Schema(%s) verbatim:\n%s", d, outbox.Schema(d))
		}
	}
	if got := outbox.Schema(outbox.SQLite, "app_outbox"); !strings.Contains(got, "CREATE TABLE IF NOT EXISTS app_outbox_lease") {
		t.Errorf("Schema with a table name:\n%s", got)
	}
}
