package kafka_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigValidateNamesTheField: every config of the package reports a
// bad field as an *eventstore.ValidationError naming it.
func TestConfigValidateNamesTheField(t *testing.T) {
	brokers := []string{"127.0.0.1:1"}
	negative := int32(-1)
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"publisher without brokers":        {kafka.PublisherConfig{}.Validate(), "Brokers"},
		"subscriber without group":         {kafka.SubscriberConfig{Brokers: brokers}.Validate(), "ConsumerGroup"},
		"subscriber with offset 5":         {kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g", InitialOffset: 5}.Validate(), "InitialOffset"},
		"subscriber without timeouts":      {kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g", InitialOffset: -2}.Validate(), "SessionTimeout"},
		"sender without brokers":           {kafka.SenderConfig{}.Validate(), "Brokers"},
		"sender with a negative partition": {kafka.SenderConfig{Brokers: brokers, ReplyPartition: &negative}.Validate(), "ReplyPartition"},
		"group start without group":        {kafka.GroupStartConfig{Brokers: brokers, Topics: []string{"t"}, Start: bus.StartEarliest}.Validate(), "Group"},
		"group start negative timeout": {kafka.GroupStartConfig{Brokers: brokers, Group: "g", Topics: []string{"t"}, Start: bus.StartEarliest,
			Timeout: -time.Second}.Validate(), "Timeout"},
		"topic reader without brokers": {kafka.TopicReaderConfig{Topics: []string{"t"}}.Validate(), "Cluster.Brokers"},
		"topic reader negative wait": {kafka.TopicReaderConfig{Cluster: kafka.Cluster{Brokers: brokers}, Topics: []string{"t"},
			MaxWait: -time.Second}.Validate(), "MaxWait"},
		"subscriber with a space in its instance id": {newSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g", InstanceID: "pod 0"}), "InstanceID"},
		"subscriber with a 249-character instance id": {newSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g",
			InstanceID: strings.Repeat("p", 249)}), "InstanceID"},
		"subscription id too long": {func() error {
			_, err := kafka.SubscriberConfig{InstanceID: strings.Repeat("p", 200)}.SubscriptionInstanceID(strings.Repeat("t", 60))
			return err
		}(), "InstanceID"},
		"group consumer without group": {kafka.GroupConsumerConfig{Subscriber: kafka.SubscriberConfig{Brokers: brokers}}.Validate(), "ConsumerGroup"},
		"group consumer heartbeat": {kafka.GroupConsumerConfig{Subscriber: kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g",
			SessionTimeout: 10 * time.Second, HeartbeatInterval: 4 * time.Second}}.Validate(), "HeartbeatInterval"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
}

// newSubscriber returns NewSubscriber's error (its defaults filled).
func newSubscriber(cfg kafka.SubscriberConfig) error {
	sub, err := kafka.NewSubscriber(cfg)
	if err == nil {
		_ = sub.Close()
	}
	return err
}
