package integration_test

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"neither main nor program": {integration.ChildConfig{}.Validate(), "Main"},
		"both":                     {integration.ChildConfig{Main: "a", Program: "b"}.Validate(), "Program"},
		"negative ready timeout":   {integration.ChildConfig{Main: "a", ReadyTimeout: -1}.Validate(), "ReadyTimeout"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
