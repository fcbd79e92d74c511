package testservers_test

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	if err := (testservers.KafkaBrokerConfig{DataDir: "d", Partitions: 1}).Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"no data dir":     {testservers.KafkaBrokerConfig{Partitions: 1}.Validate(), "DataDir"},
		"zero partitions": {testservers.KafkaBrokerConfig{DataDir: "d"}.Validate(), "Partitions"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
