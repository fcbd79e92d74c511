package projections_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
)

// TestConfigValidateNamesTheField: the configs of projections and
// projections/elastic report a bad field as an *eventstore.ValidationError
// naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	pub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	sink := &memorySink{}
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"applier without DB":     {projections.ApplierConfig{}.Validate(), "DB"},
		"replay without DB":      {projections.ReplayConfig{}.Validate(), "DB"},
		"runner without applier": {projections.RunnerConfig{}.Validate(), "Applier"},
		"runner without brokers": {projections.RunnerConfig{Applier: sink, Publisher: pub}.Validate(), "Brokers"},
		"runner negative batch":  {projections.RunnerConfig{Applier: sink, Publisher: pub, Brokers: []string{"b:9092"}, BatchSize: -1}.Validate(), "BatchSize"},
		"elastic applier":        {elastic.ApplierConfig{}.Validate(), "Client"},
		"elastic replay":         {elastic.ReplayConfig{}.Validate(), "Client"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
