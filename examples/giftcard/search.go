package giftcard

import (
	"encoding/json"
	"fmt"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Search is the gift cards' search model (an elastic.Projection): one
// document per card with its balance and whether it can still be used.
// Register it with Catalog.AddSearchModel(giftcard.Search{}).
type Search struct{}

// Doc is a document of Search.
type Doc struct {
	ID       string `json:"id"`
	Issued   int64  `json:"issued"`
	Balance  int64  `json:"balance"`
	Usable   bool   `json:"usable"`
	Orders   int    `json:"orders"`
	Sequence int64  `json:"sequence"`
}

// Name implements elastic.Projection.
func (Search) Name() string { return "giftcards-search" }

// AggregateTypes implements elastic.Projection.
func (Search) AggregateTypes() []string { return []string{AggregateType} }

// EventTypes implements elastic.Projection.
func (Search) EventTypes() []string { return Domain().EventTypes.Names() }

// IndexBody implements elastic.Projection.
func (Search) IndexBody() map[string]any {
	return map[string]any{"mappings": map[string]any{"dynamic": "strict", "properties": map[string]any{
		"id": map[string]any{"type": "keyword"}, "issued": map[string]any{"type": "long"}, "balance": map[string]any{"type": "long"},
		"usable": map[string]any{"type": "boolean"}, "orders": map[string]any{"type": "integer"}, "sequence": map[string]any{"type": "long"},
	}}}
}

// Apply implements elastic.Projection.
func (Search) Apply(doc json.RawMessage, e eventstore.Envelope) (json.RawMessage, error) {
	var d Doc
	if doc != nil {
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("decode the stored document: %w", err)
		}
	}
	switch e.EventType {
	case CardIssued:
		p, err := CardIssuedEvent.Decode(e)
		if err != nil {
			return nil, err
		}
		d = Doc{ID: e.AggregateID, Issued: p.Amount, Balance: p.Amount, Usable: p.Amount > 0}
	case CardRedeemed:
		p, err := CardRedeemedEvent.Decode(e)
		if err != nil {
			return nil, err
		}
		d.Balance -= p.Amount
		d.Orders++
		d.Usable = d.Balance > 0
	case CardCancelled:
		d.Usable = false
	default:
		return nil, &eventstore.ValidationError{Field: "event_type", Reason: fmt.Sprintf("%q is not applied by %s", e.EventType, Search{}.Name())}
	}
	d.Sequence = e.Sequence
	return json.Marshal(d)
}
