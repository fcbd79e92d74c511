package demo_test

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/demo"
	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	valid := func(mod func(*demo.Config)) demo.Config {
		c := demo.Config{Endpoints: eventpipe.Endpoints{HTTPAddr: "127.0.0.1:8080"},
			RelayMetricsAddr: "127.0.0.1:9464", ConsumeMetricsAddr: "127.0.0.1:9465", RunID: "120000"}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	if err := valid(nil).Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"relay metrics without port": {valid(func(c *demo.Config) { c.RelayMetricsAddr = "127.0.0.1" }).Validate(), "RelayMetricsAddr"},
		"consume metrics address":    {valid(func(c *demo.Config) { c.ConsumeMetricsAddr = "" }).Validate(), "ConsumeMetricsAddr"},
		"http address":               {valid(func(c *demo.Config) { c.Endpoints.HTTPAddr = "nowhere" }).Validate(), "Endpoints.HTTPAddr"},
		"run id with a space":        {valid(func(c *demo.Config) { c.RunID = "a b" }).Validate(), "RunID"},
		"a token without a subject":  {valid(func(c *demo.Config) { c.AuthToken = "x.y.z" }).Validate(), "AuthSubject"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
