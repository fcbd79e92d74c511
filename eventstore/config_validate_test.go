package eventstore_test

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	var anyStore struct{ eventstore.Store }
	processor := eventstore.Processor[wallet]{Initial: func() wallet { return wallet{} }, Rules: walletProcessor().Rules}
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"facet without store":          {eventstore.FacetConfig[wallet]{AggregateType: "wallet", Processor: processor}.Validate(), "Store"},
		"facet without aggregate type": {eventstore.FacetConfig[wallet]{Store: anyStore, Processor: processor}.Validate(), "AggregateType"},
		"facet with a bad type":        {eventstore.FacetConfig[wallet]{Store: anyStore, AggregateType: "wal#let", Processor: processor}.Validate(), "AggregateType"},
		"facet without Initial":        {eventstore.FacetConfig[wallet]{Store: anyStore, AggregateType: "wallet", Processor: eventstore.Processor[wallet]{Rules: processor.Rules}}.Validate(), "Processor.Initial"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
