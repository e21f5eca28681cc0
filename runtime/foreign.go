package runtime

import "reflect"

// Foreign returns value as a Message of category, with wire type name
// typeName and, when key is not nil, the partition key it returns. It is
// for messages whose type has no methods of seqby's because the type is
// declared elsewhere (a protobuf message, a shared contracts module's
// struct) and the user's module declares it an event or command with a
// marked alias:
//
//	//seqby:event=orders
//	//seqby:key=order_id
//	type OrderPlaced = ordersv1.OrderPlaced
//
// seqgen writes, beside that alias, a function SeqbyOrderPlaced(m) that
// calls Foreign; publish its result:
//
//	pub.Publish(ctx, events.SeqbyOrderPlaced(&ordersv1.OrderPlaced{OrderId: "o-1"}))
//
// The codec encodes value itself, so handlers decode the aliased type as
// if it had been published directly. Code seqgen writes is the intended
// caller: the category, type name and key extraction must agree with the
// handlers' registrations.
func Foreign(value any, category, typeName string, key func() (string, error)) Message {
	f := foreign{value: value, category: category, name: typeName}
	if key == nil {
		return f
	}
	return foreignKeyed{foreign: f, key: key}
}

type foreign struct {
	value          any
	category, name string
}

func (f foreign) StreamCategory() string { return f.category }

type foreignKeyed struct {
	foreign
	key func() (string, error)
}

func (f foreignKeyed) PartitionKey() (string, error) { return f.key() }

// unwrapForeign returns the value a Foreign message carries, and whether
// msg is one.
func unwrapForeign(msg Message) (foreign, bool) {
	switch f := msg.(type) {
	case foreign:
		return f, true
	case foreignKeyed:
		return f.foreign, true
	}
	return foreign{}, false
}

// payloadOf is what the codec encodes for msg: msg itself, or the value a
// Foreign message carries.
func payloadOf(msg Message) any {
	if f, ok := unwrapForeign(msg); ok {
		return f.value
	}
	return msg
}

// isNilPointer reports whether msg (or the value a Foreign message
// carries) is a nil pointer.
func isNilPointer(msg Message) bool {
	v := reflect.ValueOf(payloadOf(msg))
	return !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil()
}
