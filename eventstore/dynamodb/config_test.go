package dynamodb_test

import (
	"errors"
	"testing"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	client := ddb.New(ddb.Options{Region: "us-east-1"})
	for name, tc := range map[string]struct {
		cfg   store.Config
		field string
	}{
		"no client":           {store.Config{Table: "events"}, "Client"},
		"short table":         {store.Config{Client: client, Table: "ev"}, "Table"},
		"negative retries":    {store.Config{Client: client, Table: "events", ConflictRetries: -1}, "ConflictRetries"},
		"page size too large": {store.Config{Client: client, Table: "events", PageSize: 1001}, "PageSize"},
	} {
		_, err := store.New(tc.cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: New = %v, want an *eventstore.ValidationError on %s", name, err, tc.field)
		}
	}
}
