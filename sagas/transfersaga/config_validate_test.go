package transfersaga

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
		"negative timeout":            {Config{Timeout: -time.Second}.Validate(), "Timeout"},
		"New with a negative timeout": {newErr(Config{Timeout: -time.Second}), "Timeout"},
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
