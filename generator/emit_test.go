package generator

import "testing"

// TestImportable: the go command's internal rule, which decides whether
// the compile-time check of a Stringer key field can name its type.
func TestImportable(t *testing.T) {
	tests := []struct {
		path, from string
		want       bool
	}{
		{"example.com/m/ids", "example.com/m/events", true},
		{"example.com/m/internal/ids", "example.com/m/events", true},
		{"example.com/m/internal/ids", "example.com/m", true},
		{"example.com/m/a/internal/ids", "example.com/m/b", false},
		{"example.com/other/internal/ids", "example.com/m/events", false},
		{"example.com/other/internal", "example.com/other/x/y", true},
		{"example.com/m/internal/x/internal/y", "example.com/m/internal/z", false},
		{"example.com/m/internal/x/internal/y", "example.com/m/internal/x/z", true},
		{"example.com/m/internalish", "example.com/n", true},
	}
	for _, tt := range tests {
		if got := importable(tt.path, tt.from); got != tt.want {
			t.Errorf("importable(%q, %q) = %v, want %v", tt.path, tt.from, got, tt.want)
		}
	}
}
