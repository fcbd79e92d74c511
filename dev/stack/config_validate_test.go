package stack_test

import (
	"errors"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	ep := endpoints.Endpoints{KafkaBrokers: []string{"127.0.0.1:9092"}}
	if err := (stack.Config{Dir: "d", Endpoints: ep}).Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"no folder":        {stack.Config{Endpoints: ep}.Validate(), "Dir"},
		"no kafka brokers": {stack.Config{Dir: "d"}.Validate(), "Endpoints.KafkaBrokers"},
		"negative timeout": {stack.Config{Dir: "d", Endpoints: ep, StartTimeout: -time.Second}.Validate(), "StartTimeout"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
