// Package order is an example order domain: an order is placed, paid,
// shipped and delivered; a refund is a compensating event (OrderRefunded),
// never a deletion of the payment.
package order

// AggregateType of orders.
const AggregateType = "order"

// Event types.
const (
	OrderPlaced      = "OrderPlaced"
	PaymentProcessed = "PaymentProcessed"
	OrderShipped     = "OrderShipped"
	OrderDelivered   = "OrderDelivered"
	OrderRefunded    = "OrderRefunded"
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
