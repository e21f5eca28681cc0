package contract

import (
	"errors"
	"fmt"
	"testing"
)

// Permanent keeps the error's text and matches both ErrPermanent and the
// error it marks; marking again changes nothing.
func TestPermanent(t *testing.T) {
	poison := errors.New("poison")
	for _, err := range []error{Permanent(poison), Permanent(Permanent(poison))} {
		if err.Error() != "poison" || !errors.Is(err, ErrPermanent) || !errors.Is(err, poison) {
			t.Errorf("%q: want text poison, errors.Is ErrPermanent and poison", err)
		}
	}
	if wrapped := Permanent(fmt.Errorf("validate: %w", Permanent(poison))); wrapped.Error() != "validate: poison" {
		t.Errorf("Error() = %q, want %q", wrapped, "validate: poison")
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
}
