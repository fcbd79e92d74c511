// Package order is an example order domain: an order is placed, paid,
// shipped and delivered; a refund is a compensating event (OrderRefunded),
// never a deletion of the payment.
package order

import "github.com/eventpipe/eventpipe/eventstore"

// AggregateType of orders.
const AggregateType = "order"

// Event types.
const (
	OrderPlaced      = "OrderPlaced"      // payload OrderPlacedData
	PaymentProcessed = "PaymentProcessed" // payload PaymentProcessedData
	OrderShipped     = "OrderShipped"     // payload OrderShippedData
	OrderDelivered   = "OrderDelivered"   // payload {}
	OrderRefunded    = "OrderRefunded"    // payload OrderRefundedData
)

// Event definitions: each event type with the Go type of its payload.
var (
	OrderPlacedEvent      = eventstore.DefineEvent[OrderPlacedData](OrderPlaced)
	PaymentProcessedEvent = eventstore.DefineEvent[PaymentProcessedData](PaymentProcessed)
	OrderShippedEvent     = eventstore.DefineEvent[OrderShippedData](OrderShipped)
	OrderDeliveredEvent   = eventstore.DefineEvent[struct{}](OrderDelivered)
	OrderRefundedEvent    = eventstore.DefineEvent[OrderRefundedData](OrderRefunded)
)

// Refusal codes (see eventstore.Code): the kinds of refusal of order
// commands and rules, matched with errors.Is.
const (
	ErrNotPlaced       eventstore.Code = "order.not_placed"       // a command or event on an order never placed
	ErrOutOfTurn       eventstore.Code = "order.out_of_turn"      // an event its status does not allow (placed twice, shipped before paid, …)
	ErrPaymentMismatch eventstore.Code = "order.payment_mismatch" // a payment that is not the total
	ErrRefundTooLarge  eventstore.Code = "order.refund_too_large" // a refund of nothing or of more than is refundable
)

// OutboundOrderRefunded is published with every refund (payload
// OrderRefundedData), for the systems that pay the money back.
const OutboundOrderRefunded = "orderRefunded"

// Status of an order.
type Status string

// Order statuses, in lifecycle order.
const (
	StatusNone      Status = ""
	StatusPlaced    Status = "placed"
	StatusPaid      Status = "paid"
	StatusShipped   Status = "shipped"
	StatusDelivered Status = "delivered"
	StatusRefunded  Status = "refunded"
)

// Order is the state of one order. Amounts are in cents.
type Order struct {
	Status         Status `json:"status"`
	Customer       string `json:"customer,omitempty"`
	Total          int64  `json:"total"`
	Paid           int64  `json:"paid"`
	Refunded       int64  `json:"refunded"`
	TrackingNumber string `json:"trackingNumber,omitempty"`
}

// OrderPlacedData is the payload of OrderPlaced and PlaceOrder.
type OrderPlacedData struct {
	Customer string `json:"customer"`
	Total    int64  `json:"total"`
}

// PaymentProcessedData is the payload of PaymentProcessed and
// ProcessPayment.
type PaymentProcessedData struct {
	Amount int64 `json:"amount"`
}

// OrderShippedData is the payload of OrderShipped and ShipOrder.
type OrderShippedData struct {
	TrackingNumber string `json:"trackingNumber"`
}

// OrderRefundedData is the payload of OrderRefunded, RefundOrder and the
// orderRefunded outbound event.
type OrderRefundedData struct {
	Amount int64  `json:"amount"`
	Reason string `json:"reason,omitempty"`
}
