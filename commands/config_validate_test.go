package commands_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"dispatcher without registry":  {commands.DispatcherConfig{}.Validate(), "Registry"},
		"handler without command type": {commands.FacetHandlerConfig[int]{}.Validate(), "CommandType"},
		"handler without facet":        {commands.FacetHandlerConfig[int]{CommandType: "Do"}.Validate(), "Facet"},
		"handler with negative attempts": {commands.FacetHandlerConfig[int]{CommandType: "Do", Facet: &eventstore.Facet[int]{},
			Decide: func(eventstore.State[int], commands.Command) ([]eventstore.NewEvent, error) { return nil, nil }, MaxAttempts: -1}.Validate(), "MaxAttempts"},
		"domain without event types":                    {commands.Domain{AggregateType: "todo"}.Validate(), "EventTypes"},
		"NewDispatcher without replies":                 {newDispatcherErr(), "Replies"},
		"dispatcher requiring signatures without a key": {dispatcherErr(func(c *commands.DispatcherConfig) { c.RequireSigned = true }), "RequireSigned"},
		"dispatcher with a short producer key":          {dispatcherErr(func(c *commands.DispatcherConfig) { c.Keys = commands.Keys{"billing": []byte("short")} }), `Keys["billing"]`},
		"signer with a bad key id":                      {commands.Signer{KeyID: "a b", Key: make([]byte, 32)}.Validate(), "Signer.KeyID"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}

func newDispatcherErr() error {
	var reg commands.Registry
	if err := reg.Register(stubHandler{}); err != nil {
		return err
	}
	_, err := commands.NewDispatcher(commands.DispatcherConfig{Registry: &reg})
	return err
}

type stubHandler struct{}

func (stubHandler) CommandType() string   { return "Do" }
func (stubHandler) AggregateType() string { return "thing" }
func (stubHandler) Handle(context.Context, commands.Command) (commands.Result, error) {
	return commands.Result{}, nil
}

// dispatcherErr is NewDispatcher's error for a complete config changed by f.
func dispatcherErr(f func(*commands.DispatcherConfig)) error {
	var reg commands.Registry
	if err := reg.Register(stubHandler{}); err != nil {
		return err
	}
	cfg := commands.DispatcherConfig{Registry: &reg, Replies: &capture{}, Outcomes: stubOutcomes{}}
	f(&cfg)
	_, err := commands.NewDispatcher(cfg)
	return err
}

type stubOutcomes struct{}

func (stubOutcomes) RecordRefusal(context.Context, eventstore.Ref, string, eventstore.Refusal) (eventstore.AppendResult, error) {
	return eventstore.AppendResult{}, nil
}
