package readmodels

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Orders keeps one summary row per order: status, amounts, timestamps.
type Orders struct{}

// Name implements projections.Projection.
func (Orders) Name() string { return "orders" }

// AggregateTypes implements projections.Projection.
func (Orders) AggregateTypes() []string { return []string{order.AggregateType} }

// Tables implements projections.Rebuildable.
func (Orders) Tables() []string { return []string{"orders"} }

// EventTypes implements projections.EventTyper.
func (Orders) EventTypes() []string { return order.Domain().EventTypes.Names() }

// Apply implements projections.Projection.
func (Orders) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	switch e.EventType {
	case order.OrderPlaced:
		var d order.OrderPlacedData
		if err := e.DecodePayload(&d); err != nil {
			return err
		}
		b.Queue(`INSERT INTO orders (order_id, customer, status, total, placed_at, version, apply_count)
			VALUES ($1, $2, $3, $4, $5, $6, 1)`, e.AggregateID, d.Customer, order.StatusPlaced, d.Total, e.OccurredAt, e.Sequence)
		return nil
	case order.PaymentProcessed:
		var d order.PaymentProcessedData
		if err := e.DecodePayload(&d); err != nil {
			return err
		}
		touch(b, "orders", "order_id", e, `status = $4, paid = paid + $5, paid_at = $3`, order.StatusPaid, d.Amount)
		return nil
	case order.OrderShipped:
		var d order.OrderShippedData
		if err := e.DecodePayload(&d); err != nil {
			return err
		}
		touch(b, "orders", "order_id", e, `status = $4, tracking_number = $5, shipped_at = $3`, order.StatusShipped, d.TrackingNumber)
		return nil
	case order.OrderDelivered:
		touch(b, "orders", "order_id", e, `status = $4, delivered_at = $3`, order.StatusDelivered)
		return nil
	case order.OrderRefunded:
		var d order.OrderRefundedData
		if err := e.DecodePayload(&d); err != nil {
			return err
		}
		// Like the domain: the status becomes refunded once all that was
		// paid is paid back; a partial refund keeps it.
		touch(b, "orders", "order_id", e, `status = CASE WHEN refunded + $5 >= paid THEN $4 ELSE status END,
			refunded = refunded + $5, refunded_at = $3`, order.StatusRefunded, d.Amount)
		return nil
	default:
		return unknownEvent(e)
	}
}
