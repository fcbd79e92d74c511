package sagas_test

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"runner without saga":  {sagas.Config{}.Validate(), "Saga"},
		"saga with a bad name": {sagas.Saga[struct{}]{Name: "a.b", Events: []string{"order"}}.Validate(), "Name"},
		"saga reading nothing": {sagas.Saga[struct{}]{Name: "welcome"}.Validate(), "Events"},
		"saga without Route":   {sagas.Saga[struct{}]{Name: "welcome", Events: []string{"order"}}.Validate(), "Route"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
