package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"reflect"
)

// typeName is a message's wire name: its Go type name (pointer stripped),
// the value seqgen writes in Route.Type.
func typeName(m Message) string {
	if f, ok := unwrapForeign(m); ok {
		return f.name
	}
	t := reflect.TypeOf(m)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.Name()
}

// newMessageID returns 128 random bits in hex.
func newMessageID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
