package order

import (
	"fmt"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Command types.
const (
	PlaceOrder     = "PlaceOrder"     // payload OrderPlacedData
	ProcessPayment = "ProcessPayment" // payload PaymentProcessedData
	ShipOrder      = "ShipOrder"      // payload OrderShippedData
	DeliverOrder   = "DeliverOrder"   // payload {}
	RefundOrder    = "RefundOrder"    // payload OrderRefundedData
)

// Domain describes the order write model: its events and its commands,
// each deciding against the facet's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(), map[string]commands.Decide[Order]{
		PlaceOrder:     decideAs(OrderPlaced, func(p OrderPlacedData) error { return positive("total", p.Total) }),
		ProcessPayment: decideAs(PaymentProcessed, func(p PaymentProcessedData) error { return positive("amount", p.Amount) }),
		ShipOrder:      decideAs[OrderShippedData](OrderShipped, nil),
		DeliverOrder:   decideAs[struct{}](OrderDelivered, nil),
		RefundOrder:    decideAs(OrderRefunded, func(p OrderRefundedData) error { return positive("amount", p.Amount) }),
	})
}

// NewFacet returns the order facet on store (reads of an order's STATE).
// upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Order], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Order]{Store: store, AggregateType: AggregateType, Processor: Processor(), Upcasters: upcasters})
}

// decideAs is a decision that turns the command payload into one event of
// eventType; the rules decide whether it may happen.
func decideAs[D any](eventType string, check func(D) error) commands.Decide[Order] {
	return func(cur eventstore.State[Order], cmd commands.Command) ([]eventstore.NewEvent, error) {
		var d D
		if err := cmd.DecodePayload(&d); err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(d); err != nil {
				return nil, err
			}
		}
		if cur.Item.Status == StatusNone && eventType != OrderPlaced {
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
