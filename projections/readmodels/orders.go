package readmodels

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/bus"
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
func (Orders) EventTypes() []string {
	return []string{order.Placed, order.Paid, order.Shipped, order.Delivered, order.Refunded}
}

// Apply implements projections.Projection.
func (Orders) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	switch e.EventType {
	case order.Placed:
		var d order.PlacedData
		if err := decode(e, &d); err != nil {
			return err
		}
		b.Queue(`INSERT INTO orders (order_id, customer, status, total, placed_at, version, apply_count)
			VALUES ($1, $2, $3, $4, $5, $6, 1)`, e.AggregateID, d.Customer, order.StatusPlaced, d.Total, e.OccurredAt, e.Sequence)
		return nil
	case order.Paid:
		var d order.PaymentData
		if err := decode(e, &d); err != nil {
			return err
		}
		touch(b, "orders", "order_id", e, `status = $4, paid = paid + $5, paid_at = $3`, order.StatusPaid, d.Amount)
		return nil
	case order.Shipped:
		var d order.ShippedData
		if err := decode(e, &d); err != nil {
			return err
		}
		touch(b, "orders", "order_id", e, `status = $4, tracking_number = $5, shipped_at = $3`, order.StatusShipped, d.TrackingNumber)
		return nil
	case order.Delivered:
		touch(b, "orders", "order_id", e, `status = $4, delivered_at = $3`, order.StatusDelivered)
		return nil
	case order.Refunded:
		var d order.RefundData
		if err := decode(e, &d); err != nil {
			return err
		}
		touch(b, "orders", "order_id", e, `status = $4, refunded = refunded + $5, refunded_at = $3`, order.StatusRefunded, d.Amount)
		return nil
	default:
		return bus.Permanent(fmt.Errorf("orders: unknown event type %q", e.EventType))
	}
}
