package keyed_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
)

func TestNewRejectsInvalidConfigNamingTheField(t *testing.T) {
	base := keyed.Config{Brokers: []string{"127.0.0.1:9092"}, ConsumerGroup: "g", Logger: watermill.NopLogger{}}
	if _, err := keyed.New(base); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	newest := base
	newest.InitialOffset = sarama.OffsetNewest
	if _, err := keyed.New(newest); err != nil {
		t.Fatalf("InitialOffset OffsetNewest rejected: %v", err)
	}
	for _, tc := range []struct {
		name  string
		field string
		mod   func(*keyed.Config)
	}{
		{"no brokers", "Brokers", func(c *keyed.Config) { c.Brokers = nil }},
		{"no group", "ConsumerGroup", func(c *keyed.Config) { c.ConsumerGroup = "" }},
		{"negative in flight", "MaxInFlight", func(c *keyed.Config) { c.MaxInFlight = -1 }},
		{"negative nack sleep", "NackResendSleep", func(c *keyed.Config) { c.NackResendSleep = -time.Second }},
		{"offset 5", "InitialOffset", func(c *keyed.Config) { c.InitialOffset = 5 }},
		{"offset -3", "InitialOffset", func(c *keyed.Config) { c.InitialOffset = -3 }},
		{"negative reconnect sleep", "ReconnectRetrySleep", func(c *keyed.Config) { c.ReconnectRetrySleep = -time.Second }},
		{"negative commit interval", "CommitInterval", func(c *keyed.Config) { c.CommitInterval = -time.Second }},
		{"revoke beyond the rebalance timeout", "RevokeTimeout", func(c *keyed.Config) { c.RevokeTimeout = 8 * time.Second }},
		{"rebalance = session", "RebalanceTimeout", func(c *keyed.Config) {
			c.SessionTimeout, c.RebalanceTimeout = 10*time.Second, 10*time.Second
		}},
		{"heartbeat above a third of the session", "HeartbeatInterval", func(c *keyed.Config) {
			c.SessionTimeout, c.HeartbeatInterval = 10*time.Second, 4*time.Second
		}},
		{"credentials without a mechanism", "SASL.Mechanism", func(c *keyed.Config) {
			c.Security.SASL.Username, c.Security.SASL.Password = "u", "p"
		}},
		{"SCRAM without TLS off loopback", "SASL.Mechanism", func(c *keyed.Config) {
			c.Brokers = []string{"kafka-1.internal:9092"}
			c.Security.SASL = kafka.SASL{Mechanism: kafka.SASLScramSHA512, Username: "u", Password: "p"}
		}},
	} {
		cfg := base
		tc.mod(&cfg)
		_, err := keyed.New(cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: error %v, want an *eventstore.ValidationError on %s", tc.name, err, tc.field)
		}
		// The deprecated alias still matches.
		var ce *keyed.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: error %v, want a *ConfigError on %s", tc.name, err, tc.field)
		}
	}
}

func TestSubscribeAfterCloseFailsWithErrClosed(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := createTopic(t, brokers, "keyed-closed", 1)
	sub, err := keyed.Subscribers(keyed.Config{Brokers: brokers, Logger: watermill.NopLogger{}})(topic + "-group")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, open := <-msgs; open {
		t.Fatal("a message arrived from an empty topic")
	}
	t.Logf("Close returned after %s and closed the channel", time.Since(start).Round(time.Millisecond))
	if _, err := sub.Subscribe(context.Background(), topic); !errors.Is(err, keyed.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
	}
}
