package pgtest

import (
	"context"
	"database/sql"
	"testing"
)

func TestStartAcceptsQueries(t *testing.T) {
	s := New(t)
	if s.Port == 5432 {
		t.Fatal("the private server took the shared default port")
	}
	ctx := context.Background()
	dsn, err := s.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d, %v", one, err)
	}
}
