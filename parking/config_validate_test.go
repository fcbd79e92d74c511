package parking_test

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/parking"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"no DB":                    {parking.Config{}.Validate(), "DB"},
		"reapply without consumer": {parking.ReapplyConfig{}.Validate(), "Consumer"},
		"reapply negative batch":   {parking.ReapplyConfig{Consumer: "p", Apply: newSink().apply, BatchSize: -1}.Validate(), "BatchSize"},
		"reapply id without type":  {parking.ReapplyConfig{Consumer: "p", Apply: newSink().apply, Aggregate: eventstore.Ref{ID: "a"}}.Validate(), "Aggregate.Type"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
