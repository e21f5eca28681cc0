package runtime

import "github.com/seqby/seqby/runtime/internal/publish"

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
	return publish.Foreign(value, category, typeName, key)
}
