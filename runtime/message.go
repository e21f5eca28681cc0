package runtime

import "encoding/json"

// Message is an event or command. seqgen writes StreamCategory for every
// type marked //seqby:event=CATEGORY or //seqby:command=CATEGORY.
type Message interface {
	StreamCategory() string
}

// Partitioned is a message of a partitioned category. seqgen writes
// PartitionKey for every message type in such a category: it reads the key
// field directly, converts it to a string and applies the key rules, so a
// bad value fails with a *KeyError before anything is written.
type Partitioned interface {
	Message
	PartitionKey() (string, error)
}

// Unpartitioned is a message of a category that is not partitioned. seqgen
// writes SeqbyUnpartitioned for every message type of such a category, so
// that the type's being Partitioned as well (a PartitionKey method of its
// own, declared after seqgen last ran: seqgen refuses one) cannot route it
// to a partition stream, which no handler of the category reads: Publish,
// PublishBatch, NewRecord and the inline broker refuse such a message
// (ErrPublish) before writing anything.
type Unpartitioned interface {
	Message
	SeqbyUnpartitioned()
}

// Codec turns messages into stream payloads and back. JSON is the
// default; set another in Options.Codec and PublisherOptions.Codec (both
// sides must agree), for example to carry protobuf messages.
type Codec interface {
	// Marshal encodes a message for the payload field.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes a payload into v, a pointer to a message.
	Unmarshal(data []byte, v any) error
}

// JSON is the default Codec (encoding/json).
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
