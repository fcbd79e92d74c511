package kafkabroker

import (
	"errors"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad field of the group guard's
// config is reported as an *eventstore.ValidationError naming it (Config's
// own are in TestValidateRejectsNonLoopbackAndMissingDataDir and
// TestValidateSecurity).
func TestConfigValidateNamesTheField(t *testing.T) {
	ok := groupGuardConfig{KeepAliveAfter: 0, KeepAliveEvery: time.Second, RequestTimeout: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid group guard config: %v", err)
	}
	for name, tc := range map[string]struct {
		mod   func(*groupGuardConfig)
		field string
	}{
		"negative KeepAliveAfter": {func(c *groupGuardConfig) { c.KeepAliveAfter = -time.Second }, "KeepAliveAfter"},
		"zero KeepAliveEvery":     {func(c *groupGuardConfig) { c.KeepAliveEvery = 0 }, "KeepAliveEvery"},
		"zero RequestTimeout":     {func(c *groupGuardConfig) { c.RequestTimeout = 0 }, "RequestTimeout"},
	} {
		cfg := ok
		tc.mod(&cfg)
		err := cfg.Validate()
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, err, tc.field)
		}
	}
}
