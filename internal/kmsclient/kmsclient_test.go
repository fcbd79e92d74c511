package kmsclient

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad endpoint or role is reported as
// an *eventstore.ValidationError naming the field; a URL of a host and
// "aws" (with or without a role) pass.
func TestConfigValidateNamesTheField(t *testing.T) {
	for _, ok := range []Config{
		{Endpoint: "http://127.0.0.1:8100"},
		{Endpoint: "https://kms.internal:443/"},
		{Endpoint: "aws"},
		{Endpoint: "aws", RoleARN: "arn:aws:iam::123456789012:role/eventpipe"},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for name, tc := range map[string]struct {
		cfg   Config
		field string
	}{
		"no endpoint":         {Config{}, "Endpoint"},
		"not a URL":           {Config{Endpoint: "127.0.0.1:8100"}, "Endpoint"},
		"another scheme":      {Config{Endpoint: "ftp://x"}, "Endpoint"},
		"no host":             {Config{Endpoint: "http://"}, "Endpoint"},
		"a path":              {Config{Endpoint: "http://127.0.0.1:8100/kms"}, "Endpoint"},
		"role on a local KMS": {Config{Endpoint: "http://127.0.0.1:8100", RoleARN: "arn:aws:iam::1:role/r"}, "RoleARN"},
		"role that is no ARN": {Config{Endpoint: "aws", RoleARN: "eventpipe"}, "RoleARN"},
	} {
		err := tc.cfg.Validate()
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, err, tc.field)
		}
	}
}
