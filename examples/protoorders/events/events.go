// Package events declares the protobuf order events of ordersv1 seqby
// events of category "proto-orders", partitioned by client: the markers
// stand on aliases here, because ordersv1's .pb.go is rewritten by every
// protoc run.
package events

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/seqby/seqby/examples/protoorders/ordersv1"
	"github.com/seqby/seqby/runtime"
)

// OrderPlaced is the event ordersv1.OrderPlaced.
//
//seqby:event=proto-orders
//seqby:key=client_id
type OrderPlaced = ordersv1.OrderPlaced

// PaymentReceived is the event ordersv1.PaymentReceived.
//
//seqby:event=proto-orders
type PaymentReceived = ordersv1.PaymentReceived

// OrderShipped is the event ordersv1.OrderShipped.
//
//seqby:event=proto-orders
type OrderShipped = ordersv1.OrderShipped

// Proto is the runtime.Codec of protobuf messages: set it as both the
// engine's Options.Codec and the publisher's PublisherOptions.Codec.
var Proto runtime.Codec = protoCodec{}

type protoCodec struct{}

func (protoCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto codec: %T is not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (protoCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto codec: %T is not a protobuf message", v)
	}
	return proto.Unmarshal(data, m)
}
