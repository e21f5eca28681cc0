// Package events holds the example's messages: cart events partitioned by
// client, and order and payment events partitioned by order (through the
// sequential process manager that correlates them).
package events

// ItemAdded is published when a client adds an item to their cart.
//
//seqby:event=cart
//seqby:key=client_id
type ItemAdded struct {
	ClientID string `json:"client_id"`
	Item     string `json:"item"`
	Seq      int    `json:"seq"`
}

// CartCheckedOut is published when a client checks out, opening an order.
//
//seqby:event=cart
type CartCheckedOut struct {
	ClientID string `json:"client_id"`
	OrderID  string `json:"order_id"`
	Seq      int    `json:"seq"`
}

// OrderPlaced is published when an order is placed.
//
//seqby:event=order
type OrderPlaced struct {
	OrderID  string `json:"order_id"`
	ClientID string `json:"client_id"`
	Amount   int64  `json:"amount"`
}

// PaymentReceived is published when an order is paid.
//
//seqby:event=payment
type PaymentReceived struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
}
