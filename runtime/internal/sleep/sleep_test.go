package sleep

import (
	"context"
	"testing"
	"time"
)

// For returns true after its duration, and false at once for an ended
// context however long the duration.
func TestFor(t *testing.T) {
	if !For(context.Background(), time.Millisecond) {
		t.Fatal("For(background, 1ms) = false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if For(ctx, time.Hour) {
		t.Fatal("For(cancelled, 1h) = true")
	}
}
