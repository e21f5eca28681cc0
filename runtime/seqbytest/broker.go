package seqbytest

import (
	"testing"

	"github.com/seqby/seqby/runtime"
)

// NewBroker returns an in-process broker with regs registered (the test
// fails if one is refused), encoding messages as JSON, the engine's
// default codec. See the package doc for how it runs them.
func NewBroker(t testing.TB, regs ...runtime.Registration) *runtime.InlineBroker {
	t.Helper()
	return NewBrokerCodec(t, runtime.JSON, regs...)
}

// NewBrokerCodec is NewBroker with the codec the service's engine and
// publishers use (runtime.Options.Codec, runtime.PublisherOptions.Codec):
// every message is encoded and decoded with it, as on the wire, so a
// handler of protobuf messages is tested with the protobuf codec it runs
// with. A nil codec is JSON.
func NewBrokerCodec(t testing.TB, codec runtime.Codec, regs ...runtime.Registration) *runtime.InlineBroker {
	t.Helper()
	if codec == nil {
		codec = runtime.JSON
	}
	b := runtime.NewInlineBroker(codec)
	if err := b.Register(regs...); err != nil {
		t.Fatalf("seqbytest: register: %v", err)
	}
	return b
}
