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

// Command definitions: each command type with the Go type of its payload.
var (
	PlaceOrderCommand     = commands.DefineCommand[OrderPlacedData](PlaceOrder)
	ProcessPaymentCommand = commands.DefineCommand[PaymentProcessedData](ProcessPayment)
	ShipOrderCommand      = commands.DefineCommand[OrderShippedData](ShipOrder)
	DeliverOrderCommand   = commands.DefineCommand[struct{}](DeliverOrder)
	RefundOrderCommand    = commands.DefineCommand[OrderRefundedData](RefundOrder)
)

// Domain describes the order write model: its events and its commands,
// each deciding against the facet's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(),
		decideAs(PlaceOrderCommand, OrderPlacedEvent, func(p OrderPlacedData) error { return positive("total", p.Total) }),
		decideAs(ProcessPaymentCommand, PaymentProcessedEvent, func(p PaymentProcessedData) error { return positive("amount", p.Amount) }),
		decideAs(ShipOrderCommand, OrderShippedEvent, nil),
		decideAs(DeliverOrderCommand, OrderDeliveredEvent, nil),
		decideAs(RefundOrderCommand, OrderRefundedEvent, func(p OrderRefundedData) error { return positive("amount", p.Amount) }),
	)
}

// NewFacet returns the order facet on store (reads of an order's STATE).
// upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Order], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Order]{Store: store, AggregateType: AggregateType, Processor: Processor(), Upcasters: upcasters})
}

// decideAs is the decision of cmd that records its payload as one event
// of type ev (the same payload type); the rules decide whether it may
// happen.
func decideAs[D any](cmd commands.CommandDef[D], ev eventstore.EventDef[D], check func(D) error) commands.Decider[Order] {
	return commands.OnCommand(cmd, func(cur eventstore.State[Order], c commands.Command, d D) ([]eventstore.NewEvent, error) {
		if check != nil {
			if err := check(d); err != nil {
				return nil, err
			}
		}
		if cur.Item.Status == StatusNone && ev.Name() != OrderPlaced {
			return nil, commands.NotFoundWith(ErrNotPlaced, "order %s was never placed", c.AggregateID)
		}
		return []eventstore.NewEvent{ev.New(d)}, nil
	})
}

func positive(field string, v int64) error {
	if v <= 0 {
		return &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf("is %d, want > 0", v)}
	}
	return nil
}
