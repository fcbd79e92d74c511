package kafkatest_test

import (
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/bus/kafka/kafkatest"
	"github.com/eventpipe/eventpipe/eventstore"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	if err := (kafkatest.ClusterConfig{}).Validate(); err != nil {
		t.Fatalf("zero ClusterConfig rejected: %v", err)
	}
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"negative partitions": {kafkatest.ClusterConfig{Partitions: -1}.Validate(), "Partitions"},
		"unknown mechanism":   {kafkatest.ClusterConfig{Users: []kafkatest.User{{Mechanism: "GSSAPI", Name: "u", Password: "p"}}}.Validate(), "Users[0].Mechanism"},
		"user without password": {kafkatest.ClusterConfig{Users: []kafkatest.User{
			{Mechanism: "PLAIN", Name: "u", Password: "p"}, {Mechanism: "SCRAM-SHA-512", Name: "v"}}}.Validate(), "Users[1].Password"},
		"raw member without group": {kafkatest.RawMemberConfig{Brokers: []string{"127.0.0.1:1"}}.Validate(), "Group"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}
