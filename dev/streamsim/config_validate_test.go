package streamsim_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/dev/streamsim"
	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	if err := (streamsim.Config{}).Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	rangeKey := []types.KeySchemaElement{{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}}
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"negative shards":   {streamsim.Config{Shards: -1}.Validate(), "Shards"},
		"negative latency":  {streamsim.Config{CallLatency: -time.Second}.Validate(), "CallLatency"},
		"too many per call": {streamsim.Config{MaxRecordsPerCall: 1001}.Validate(), "MaxRecordsPerCall"},
		"unknown view type": {streamsim.Config{StreamViewType: "SOME_IMAGE"}.Validate(), "StreamViewType"},
		"key without name":  {streamsim.Config{KeySchema: []types.KeySchemaElement{{KeyType: types.KeyTypeHash}}}.Validate(), "KeySchema[0].AttributeName"},
		"no hash key":       {streamsim.Config{KeySchema: rangeKey}.Validate(), "KeySchema"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
