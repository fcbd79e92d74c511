package ordersaga

import (
	"errors"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"negative ShipWithin":            {Config{ShipWithin: -time.Second}.Validate(), "ShipWithin"},
		"New with a negative ShipWithin": {newErr(Config{ShipWithin: -time.Second}), "ShipWithin"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}

// newErr is the error New panics with, or nil.
func newErr(cfg Config) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err, _ = r.(error)
		}
	}()
	New(cfg)
	return nil
}
