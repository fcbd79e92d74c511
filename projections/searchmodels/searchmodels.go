// Package searchmodels holds the Elasticsearch read models of the example
// domains (todos and orders), each a projections/elastic Projection, and
// the searches that read them.
package searchmodels

import (
	"encoding/json"
	"fmt"

	"github.com/eventpipe/eventpipe/eventstore"
)

// fold decodes doc (when there is one) into d, applies f and encodes the
// result: the shape of every Apply here.
func fold[D any](doc json.RawMessage, f func(d *D) error) (json.RawMessage, error) {
	var d D
	if doc != nil {
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("decode the stored document: %w", err)
		}
	}
	if err := f(&d); err != nil {
		return nil, err
	}
	return json.Marshal(&d)
}

// indexBody is the create-index body of a search model: one shard (the
// documents of a model fit one), no replicas (a local default; raise them
// in production with the index settings API), strict mappings of
// properties.
func indexBody(properties map[string]any) map[string]any {
	return map[string]any{
		"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0},
		"mappings": map[string]any{"dynamic": "strict", "properties": properties},
	}
}

// unknownEvent is the error for an event type a read model does not
// apply: permanent, so the event goes to the poison topic rather than
// being dropped silently.
func unknownEvent(e eventstore.Envelope) error {
	return fmt.Errorf("%s: %w", e, &eventstore.ValidationError{Field: "event_type",
		Reason: fmt.Sprintf("%q is not applied by this read model", e.EventType)})
}

// notCreated is the error for an event that arrives before its
// aggregate's first: gap repair rules it out, so it is a defect.
func notCreated(e eventstore.Envelope) error {
	return fmt.Errorf("%s: no document (its creating event was never applied)", e)
}
