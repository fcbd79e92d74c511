package endpoints

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestKMSSettings: the KMS endpoint and key id default to the local
// stack's KMS and the alias it creates, come from EVENTPIPE_KMS_ENDPOINT
// and EVENTPIPE_KMS_KEY_ID, and are printed by Exports (`stack env`); the
// role goes to the KMS client only when its endpoint is AWS.
func TestKMSSettings(t *testing.T) {
	t.Setenv(EnvKMS, "")
	t.Setenv(EnvKMSKeyID, " ")
	t.Setenv(EnvAWSRoleARN, "arn:aws:iam::123456789012:role/eventpipe")
	def := FromEnv()
	if def.KMS != "http://127.0.0.1:8100" || def.KMSKeyID != "alias/eventpipe-subjects" {
		t.Errorf("defaults KMS %q key %q", def.KMS, def.KMSKeyID)
	}
	if err := def.ValidateKMS(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if c := def.KMSClient(); c.RoleARN != "" {
		t.Errorf("a local KMS endpoint gets the role %q", c.RoleARN)
	}
	for _, want := range []string{"export EVENTPIPE_KMS_ENDPOINT=http://127.0.0.1:8100", "export EVENTPIPE_KMS_KEY_ID=alias/eventpipe-subjects"} {
		if !slices.Contains(def.Exports(), want) {
			t.Errorf("Exports lack %q: %v", want, def.Exports())
		}
	}

	t.Setenv(EnvKMS, "aws")
	t.Setenv(EnvKMSKeyID, "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab")
	aws := Endpoints{}.Fill()
	if aws.KMS != "aws" || !strings.HasSuffix(aws.KMSKeyID, "key/1234abcd-12ab-34cd-56ef-1234567890ab") {
		t.Errorf("from the environment: KMS %q key %q", aws.KMS, aws.KMSKeyID)
	}
	if c := aws.KMSClient(); c.RoleARN != "arn:aws:iam::123456789012:role/eventpipe" {
		t.Errorf("AWS KMS client role %q, want the role", c.RoleARN)
	}
	if err := aws.ValidateKMS(); err != nil {
		t.Errorf("AWS KMS with a key ARN: %v", err)
	}
}

// TestValidateKMSRefusesBadSettings: an endpoint that is not a URL nor
// "aws", or a key id KMS would not take, is an *eventstore.ValidationError
// whose message names the variable.
func TestValidateKMSRefusesBadSettings(t *testing.T) {
	good := Default()
	for name, tc := range map[string]struct {
		ep      Endpoints
		field   string
		varName string
	}{
		"empty endpoint":       {with(good, func(e *Endpoints) { e.KMS = "" }), "Endpoint", EnvKMS},
		"no scheme":            {with(good, func(e *Endpoints) { e.KMS = "127.0.0.1:8100" }), "Endpoint", EnvKMS},
		"another scheme":       {with(good, func(e *Endpoints) { e.KMS = "ftp://127.0.0.1:8100" }), "Endpoint", EnvKMS},
		"AWS in capitals":      {with(good, func(e *Endpoints) { e.KMS = "AWS" }), "Endpoint", EnvKMS},
		"a path":               {with(good, func(e *Endpoints) { e.KMS = "http://127.0.0.1:8100/kms" }), "Endpoint", EnvKMS},
		"role not an ARN":      {with(good, func(e *Endpoints) { e.KMS, e.AWSRoleARN = "aws", "eventpipe" }), "RoleARN", EnvKMS},
		"empty key":            {with(good, func(e *Endpoints) { e.KMSKeyID = "" }), "KeyID", EnvKMSKeyID},
		"alias without a name": {with(good, func(e *Endpoints) { e.KMSKeyID = "alias/" }), "KeyID", EnvKMSKeyID},
		"an AWS managed key":   {with(good, func(e *Endpoints) { e.KMSKeyID = "alias/aws/s3" }), "KeyID", EnvKMSKeyID},
		"a role ARN as key":    {with(good, func(e *Endpoints) { e.KMSKeyID = "arn:aws:iam::123456789012:role/r" }), "KeyID", EnvKMSKeyID},
		"a path as key":        {with(good, func(e *Endpoints) { e.KMSKeyID = "keys/subjects" }), "KeyID", EnvKMSKeyID},
	} {
		err := tc.ep.ValidateKMS()
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(err.Error(), tc.varName) {
			t.Errorf("%s: ValidateKMS = %v, want an *eventstore.ValidationError on %s naming %s", name, err, tc.field, tc.varName)
		}
	}
	for _, id := range []string{"alias/eventpipe-subjects", "1234abcd-12ab-34cd-56ef-1234567890ab", "mrk-1234abcd12ab34cd56ef1234567890ab",
		"arn:aws:kms:us-east-1:111122223333:alias/eventpipe-subjects"} {
		if err := with(good, func(e *Endpoints) { e.KMSKeyID = id }).ValidateKMS(); err != nil {
			t.Errorf("key id %q refused: %v", id, err)
		}
	}
}

func with(e Endpoints, mod func(*Endpoints)) Endpoints {
	mod(&e)
	return e
}
