package otlp_test

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tracing/otlp"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"bad endpoint": {otlp.Config{Endpoint: "ftp://x"}.Validate(), "Endpoint"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
