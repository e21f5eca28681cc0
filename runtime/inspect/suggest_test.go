package inspect

import "testing"

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"orders", "orders", 0},
		{"ordres", "orders", 1}, // a swap of neighbours is one edit
		{"order", "orders", 1},
		{"shop:{zz}", "shop:{a}", 2},
		{"Zürich", "Zurich", 1}, // by runes, not bytes
		{"abc", "xyz", 3},
		{"", "abc", 3},
	}
	for _, tt := range tests {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	handlers := []string{"example.com/shop/billing.Billing", "ops", "orders"}
	tests := []struct {
		name, in   string
		candidates []string
		want       string
	}{
		{"typo", "ordres", handlers, ` (did you mean "orders"?)`},
		{"type name of a handler", "billing.billing", handlers, ` (did you mean "example.com/shop/billing.Billing"?)`},
		{"nothing near", "payments", handlers, ""},
		{"short names need a close match", "op", []string{"ops", "xy"}, ` (did you mean "ops"?)`},
		{"no candidates", "x", nil, ""},
		{"a partition for its DLQ", "shop:{a}", []string{"shop:{a}:dlq", "shop:{b}:dlq"}, ` (did you mean "shop:{a}:dlq"?)`},
		{"the nearest wins", "shop:{ab}", []string{"shop:{a}", "shop:{abc}", "shop:{ab2}x"}, ` (did you mean "shop:{a}"?)`},
		{"a bare key for its stream", "client-1", []string{"order:{client-10}", "order:{client-1}", "order:{client-2}"}, ` (did you mean "order:{client-1}"?)`},
		{"a short bare key", "a", []string{"shop:{b}", "shop:{a}"}, ` (did you mean "shop:{a}"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DidYouMean(tt.in, tt.candidates); got != tt.want {
				t.Fatalf("DidYouMean(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
