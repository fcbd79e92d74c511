// Package order is an example order domain: an order is placed, paid,
// shipped and delivered; a refund is a compensating event (OrderRefunded),
// never a deletion of the payment.
package order

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// AggregateType of orders.
const AggregateType = "order"

// Event types.
const (
	Placed    = "OrderPlaced"
	Paid      = "PaymentProcessed"
	Shipped   = "OrderShipped"
	Delivered = "OrderDelivered"
	Refunded  = "OrderRefunded"
)

// Command types.
const (
	Place   = "PlaceOrder"
	Pay     = "ProcessPayment"
	Ship    = "ShipOrder"
	Deliver = "DeliverOrder"
	Refund  = "RefundOrder"
)

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
	TrackingNumber string `json:"tracking_number,omitempty"`
}

// PlacedData is the payload of OrderPlaced and PlaceOrder.
type PlacedData struct {
	Customer string `json:"customer"`
	Total    int64  `json:"total"`
}

// PaymentData is the payload of PaymentProcessed / ProcessPayment.
type PaymentData struct {
	Amount int64 `json:"amount"`
}

// ShippedData is the payload of OrderShipped / ShipOrder.
type ShippedData struct {
	TrackingNumber string `json:"trackingNumber"`
}

// RefundData is the payload of OrderRefunded / RefundOrder.
type RefundData struct {
	Amount int64  `json:"amount"`
	Reason string `json:"reason,omitempty"`
}

// transition checks that an event may follow the current status.
func transition(s Order, from []Status, to string) error {
	for _, f := range from {
		if s.Status == f {
			return nil
		}
	}
	if s.Status == StatusNone {
		return eventstore.Rejectf("%s on an order that was never placed", to)
	}
	return eventstore.Rejectf("%s not allowed when the order is %s", to, s.Status)
}

// Processor holds the order rules: the lifecycle placed → paid → shipped
// → delivered, with a refund (of at most what was paid) after payment.
var Processor = eventstore.Processor[Order]{
	Initial: func() Order { return Order{} },
	Rules: map[string]eventstore.Rule[Order]{
		Placed: eventstore.On(func(s Order, d PlacedData, _ *eventstore.Outbox) (Order, error) {
			if err := transition(s, []Status{StatusNone}, Placed); err != nil {
				return s, err
			}
			s.Status, s.Customer, s.Total = StatusPlaced, d.Customer, d.Total
			return s, nil
		}),
		Paid: eventstore.On(func(s Order, d PaymentData, _ *eventstore.Outbox) (Order, error) {
			if err := transition(s, []Status{StatusPlaced}, Paid); err != nil {
				return s, err
			}
			if d.Amount != s.Total {
				return s, eventstore.Rejectf("payment of %d does not match the total %d", d.Amount, s.Total)
			}
			s.Status, s.Paid = StatusPaid, d.Amount
			return s, nil
		}),
		Shipped: eventstore.On(func(s Order, d ShippedData, _ *eventstore.Outbox) (Order, error) {
			if err := transition(s, []Status{StatusPaid}, Shipped); err != nil {
				return s, err
			}
			s.Status, s.TrackingNumber = StatusShipped, d.TrackingNumber
			return s, nil
		}),
		Delivered: eventstore.On(func(s Order, _ struct{}, _ *eventstore.Outbox) (Order, error) {
			if err := transition(s, []Status{StatusShipped}, Delivered); err != nil {
				return s, err
			}
			s.Status = StatusDelivered
			return s, nil
		}),
		Refunded: eventstore.On(func(s Order, d RefundData, out *eventstore.Outbox) (Order, error) {
			if err := transition(s, []Status{StatusPaid, StatusShipped, StatusDelivered}, Refunded); err != nil {
				return s, err
			}
			if d.Amount <= 0 || d.Amount > s.Paid-s.Refunded {
				return s, eventstore.Rejectf("refund of %d exceeds the refundable %d", d.Amount, s.Paid-s.Refunded)
			}
			s.Refunded += d.Amount
			if s.Refunded == s.Paid {
				s.Status = StatusRefunded
			}
			out.Publish("orderRefunded", map[string]any{"amount": d.Amount, "reason": d.Reason})
			return s, nil
		}),
	},
}

// decodeInto decodes a command payload strictly into v.
func decodeInto(cmd commands.Command, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(cmd.Payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &eventstore.ValidationError{Field: "payload", Reason: fmt.Sprintf("%s: %v", cmd.Type, err)}
	}
	return nil
}

// decideAs is a decision that turns the command payload into one event of
// eventType; the rules decide whether it may happen.
func decideAs[D any](eventType string, check func(D) error) commands.Decide[Order] {
	return func(cur eventstore.State[Order], cmd commands.Command) ([]eventstore.NewEvent, error) {
		var d D
		if err := decodeInto(cmd, &d); err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(d); err != nil {
				return nil, err
			}
		}
		if cur.Item.Status == StatusNone && eventType != Placed {
			return nil, commands.NotFound("order %s was never placed", cmd.AggregateID)
		}
		return []eventstore.NewEvent{eventstore.Event(eventType, d)}, nil
	}
}

func positive(field string, v int64) error {
	if v <= 0 {
		return &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf("is %d, want > 0", v)}
	}
	return nil
}

// Domain describes the order write model: its events and its commands
// (Place, Pay, Ship, Deliver, Refund), each deciding against the facet's
// STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor, map[string]commands.Decide[Order]{
		Place:   decideAs(Placed, func(p PlacedData) error { return positive("total", p.Total) }),
		Pay:     decideAs(Paid, func(p PaymentData) error { return positive("amount", p.Amount) }),
		Ship:    decideAs[ShippedData](Shipped, nil),
		Deliver: decideAs[struct{}](Delivered, nil),
		Refund:  decideAs(Refunded, func(p RefundData) error { return positive("amount", p.Amount) }),
	})
}
