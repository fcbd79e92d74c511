package searchmodels

import (
	"encoding/json"
	"time"

	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
)

// OrderSearch is the orders' Elasticsearch read model: one document per
// order with its status, amounts (in cents), customer and timestamps, for
// filtering by status, ranges on the total and aggregations by status and
// by day.
type OrderSearch struct{}

// OrderDoc is a document of OrderSearch.
type OrderDoc struct {
	ID             string       `json:"id"`
	Customer       string       `json:"customer"`
	Status         order.Status `json:"status"`
	Total          int64        `json:"total"`
	Paid           int64        `json:"paid"`
	Refunded       int64        `json:"refunded"`
	TrackingNumber string       `json:"tracking_number,omitempty"`
	PlacedAt       time.Time    `json:"placed_at"`
	PaidAt         *time.Time   `json:"paid_at,omitempty"`
	ShippedAt      *time.Time   `json:"shipped_at,omitempty"`
	DeliveredAt    *time.Time   `json:"delivered_at,omitempty"`
	RefundedAt     *time.Time   `json:"refunded_at,omitempty"`
	UpdatedAt      time.Time    `json:"updated_at"`
	Sequence       int64        `json:"sequence"`
}

// Name implements elastic.Projection.
func (OrderSearch) Name() string { return "orders-search" }

// AggregateTypes implements elastic.Projection.
func (OrderSearch) AggregateTypes() []string { return []string{order.AggregateType} }

// EventTypes implements elastic.Projection.
func (OrderSearch) EventTypes() []string { return order.Domain().EventTypes.Names() }

// IndexBody implements elastic.Projection.
func (OrderSearch) IndexBody() map[string]any {
	date := map[string]any{"type": "date"}
	return indexBody(map[string]any{
		"id":              map[string]any{"type": "keyword"},
		"customer":        map[string]any{"type": "keyword"},
		"status":          map[string]any{"type": "keyword"},
		"total":           map[string]any{"type": "long"},
		"paid":            map[string]any{"type": "long"},
		"refunded":        map[string]any{"type": "long"},
		"tracking_number": map[string]any{"type": "keyword"},
		"placed_at":       date, "paid_at": date, "shipped_at": date,
		"delivered_at": date, "refunded_at": date, "updated_at": date,
		"sequence": map[string]any{"type": "long"},
	})
}

// Apply implements elastic.Projection.
func (OrderSearch) Apply(doc json.RawMessage, e eventstore.Envelope) (json.RawMessage, error) {
	return fold(doc, func(d *OrderDoc) error {
		at := e.OccurredAt
		if e.EventType != order.OrderPlaced && d.ID == "" {
			return notCreated(e)
		}
		switch e.EventType {
		case order.OrderPlaced:
			var p order.OrderPlacedData
			if err := e.DecodePayload(&p); err != nil {
				return err
			}
			*d = OrderDoc{ID: e.AggregateID, Customer: p.Customer, Status: order.StatusPlaced, Total: p.Total, PlacedAt: at}
		case order.PaymentProcessed:
			var p order.PaymentProcessedData
			if err := e.DecodePayload(&p); err != nil {
				return err
			}
			d.Status, d.Paid, d.PaidAt = order.StatusPaid, d.Paid+p.Amount, &at
		case order.OrderShipped:
			var p order.OrderShippedData
			if err := e.DecodePayload(&p); err != nil {
				return err
			}
			d.Status, d.TrackingNumber, d.ShippedAt = order.StatusShipped, p.TrackingNumber, &at
		case order.OrderDelivered:
			d.Status, d.DeliveredAt = order.StatusDelivered, &at
		case order.OrderRefunded:
			var p order.OrderRefundedData
			if err := e.DecodePayload(&p); err != nil {
				return err
			}
			// Like the domain: refunded once all that was paid is paid
			// back; a partial refund keeps the status.
			d.Refunded, d.RefundedAt = d.Refunded+p.Amount, &at
			if d.Refunded >= d.Paid {
				d.Status = order.StatusRefunded
			}
		default:
			return unknownEvent(e)
		}
		d.Sequence, d.UpdatedAt = e.Sequence, at
		return nil
	})
}
