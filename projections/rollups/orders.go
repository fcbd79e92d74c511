package rollups

import (
	"fmt"

	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/rollup"
)

// OrdersName is the name of the built-in order roll-up: its table is
// rollup_order_rollups.
const OrdersName = "order-rollups"

// The measures of the order roll-up; amounts in cents.
const (
	MeasureOrders      = "orders"       // orders placed (OrderPlaced)
	MeasurePlacedTotal = "placed_total" // the sum of their totals
	MeasurePayments    = "payments"     // payments (PaymentProcessed)
	MeasureRevenue     = "revenue"      // the sum of their amounts
	MeasureRefunds     = "refunds"      // refunds (OrderRefunded)
	MeasureRefunded    = "refunded"     // the sum of their amounts
)

// OrdersDefinition is the order roll-up: per hour and per day when they
// happened, the orders placed and their totals, the payments and the
// revenue, the refunds and the amounts refunded. It reads every order
// event type, so that catching up never needs a gap repair, and measures
// three of them.
func OrdersDefinition() Definition {
	return Definition{
		Name:           OrdersName,
		AggregateTypes: []string{order.AggregateType},
		EventTypes:     order.Domain().EventTypes.Names(),
		Measure:        measureOrder,
	}
}

// Orders returns the order roll-up's projection (OrdersDefinition).
func Orders() *Projection {
	p, err := New(OrdersDefinition())
	if err != nil {
		panic(fmt.Sprintf("rollups: the order roll-up: %v", err)) // fixed and tested
	}
	return p
}

func measureOrder(e eventstore.Envelope) (rollup.Measures, error) {
	switch e.EventType {
	case order.OrderPlaced:
		var d order.OrderPlacedData
		if err := e.DecodePayload(&d); err != nil {
			return nil, err
		}
		return rollup.Measures{MeasureOrders: 1, MeasurePlacedTotal: d.Total}, nil
	case order.PaymentProcessed:
		var d order.PaymentProcessedData
		if err := e.DecodePayload(&d); err != nil {
			return nil, err
		}
		return rollup.Measures{MeasurePayments: 1, MeasureRevenue: d.Amount}, nil
	case order.OrderRefunded:
		var d order.OrderRefundedData
		if err := e.DecodePayload(&d); err != nil {
			return nil, err
		}
		return rollup.Measures{MeasureRefunds: 1, MeasureRefunded: d.Amount}, nil
	}
	return nil, nil
}
