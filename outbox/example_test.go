package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// OrderPlaced is an event of the partitioned category "order", keyed by
// ClientID. Its two methods are what seqgen writes for
//
//	//seqby:event category=order
//	type OrderPlaced struct {
//		//seqby:key
//		ClientID string
//		...
//	}
type OrderPlaced struct {
	OrderID  string `json:"order_id"`
	ClientID string `json:"client_id"`
}

func (*OrderPlaced) StreamCategory() string { return "order" }
func (e *OrderPlaced) PartitionKey() (string, error) {
	return runtime.Key("order", "ClientID", e.ClientID)
}

// placeOrder is a business operation: the order row and its event are
// written in one transaction, so both commit or neither does. A refused
// event (a bad key) fails the operation, and the order rolls back too.
func placeOrder(ctx context.Context, db *sql.DB, ob *outbox.Outbox, orderID, clientID string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, client) VALUES (?, ?)`, orderID, clientID); err != nil {
		return err
	}
	if _, err := ob.Add(ctx, tx, &OrderPlaced{OrderID: orderID, ClientID: clientID},
		runtime.WithMessageID("order-placed-"+orderID)); err != nil {
		return err
	}
	return tx.Commit()
}

// A service records its events in the transactions of the changes that
// cause them (Add), and a relay publishes them to Redis afterwards, each
// key's in order. The dialect is given once, to outbox.New: the Outbox
// migrates its tables and makes the relay. SQLite and an embedded Redis
// keep the example self-contained; in production, outbox.Postgres on the
// service's database and runtime.Connect(ctx, os.Getenv("REDIS_URL")).
func Example() {
	ctx := context.Background()

	// The service's database, with the outbox's tables next to its own.
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ob := outbox.New(outbox.Options{Dialect: outbox.SQLite})
	if err := ob.Migrate(ctx, db); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, client TEXT NOT NULL)`); err != nil {
		fmt.Println(err)
		return
	}

	// An order and its event commit together.
	if err := placeOrder(ctx, db, ob, "o-1", "c-1"); err != nil {
		fmt.Println(err)
		return
	}
	// An event whose key breaks the rules is refused before anything is
	// written, and the order rolls back with it.
	err = placeOrder(ctx, db, ob, "o-2", "")
	fmt.Println("o-2 refused for its key:", errors.Is(err, runtime.ErrInvalidKey))
	var orders int
	db.QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&orders)
	st, _ := ob.Stats(ctx, db)
	fmt.Printf("orders: %d, pending records: %d\n", orders, st.Pending)

	// The relay, which every instance of the service runs: one at a time
	// holds the lease and publishes.
	redisURL, stopRedis := seqbytest.EmbeddedRedis() // in production: os.Getenv("REDIS_URL")
	defer stopRedis()
	client, err := runtime.Connect(ctx, redisURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	relay := ob.NewRelay(db, runtime.NewPublisher(client), outbox.RelayOptions{
		PollInterval: 10 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler), // the example's output only
	})
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }() // nil when relayCtx ends

	// Engines would consume it; here, read the partition stream the
	// relay published to, waiting for its first entry.
	streams, err := client.XRead(ctx, &redis.XReadArgs{Streams: []string{"order:{c-1}", "0"}, Count: 1, Block: 10 * time.Second}).Result()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range streams {
		for _, m := range s.Messages {
			fmt.Printf("%s: type %s, message id %s, payload %s\n", s.Stream, m.Values["type"], m.Values["id"], m.Values["payload"])
		}
	}
	stopRelay()
	if err := <-relayDone; err != nil {
		fmt.Println(err)
	}

	// Output:
	// o-2 refused for its key: true
	// orders: 1, pending records: 1
	// order:{c-1}: type OrderPlaced, message id order-placed-o-1, payload {"order_id":"o-1","client_id":"c-1"}
}
