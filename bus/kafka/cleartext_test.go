package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// TestSASLPasswordsWithoutTLSAreRefusedOffLoopback: SASL PLAIN or SCRAM
// without TLS to a broker that is not loopback is refused by every
// config of the package (and Ping), naming the setting and how to allow
// it; loopback brokers, TLS or AllowCleartextCredentials (also from
// EVENTPIPE_ALLOW_CLEARTEXT_CREDENTIALS) pass.
func TestSASLPasswordsWithoutTLSAreRefusedOffLoopback(t *testing.T) {
	validate := map[string]func(brokers []string, sec kafka.Security) error{
		"publisher": func(b []string, s kafka.Security) error {
			return kafka.PublisherConfig{Brokers: b, Security: s}.Validate()
		},
		"subscriber": func(b []string, s kafka.Security) error {
			return newSubscriber(kafka.SubscriberConfig{Brokers: b, Security: s, ConsumerGroup: "g"})
		},
		"sender": func(b []string, s kafka.Security) error {
			return kafka.SenderConfig{Brokers: b, Security: s}.Validate()
		},
		"group start": func(b []string, s kafka.Security) error {
			return kafka.GroupStartConfig{Brokers: b, Security: s, Group: "g", Topics: []string{"t"}, Start: bus.StartEarliest}.Validate()
		},
		"topic reader": func(b []string, s kafka.Security) error {
			return kafka.TopicReaderConfig{Cluster: kafka.Cluster{Brokers: b, Security: s}, Topics: []string{"t"}}.Validate()
		},
		"ping": func(b []string, s kafka.Security) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // only the validation is of interest
			return kafka.Ping(ctx, kafka.Cluster{Brokers: b, Security: s})
		},
	}
	remote := []string{"127.0.0.1:9092", "kafka-1.internal:9092"}
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA512} {
		sec := kafka.Security{SASL: kafka.SASL{Mechanism: mech, Username: "u", Password: "p"}}
		for name, v := range validate {
			err := v(remote, sec)
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) || ve.Field != "SASL.Mechanism" || !strings.Contains(err.Error(), tlsconfig.EnvAllowCleartextCredentials) ||
				!strings.Contains(err.Error(), "kafka-1.internal:9092") {
				t.Errorf("%s, %s without TLS to %v: %v, want an *eventstore.ValidationError on SASL.Mechanism naming the broker and %s",
					name, mech, remote, err, tlsconfig.EnvAllowCleartextCredentials)
			}
			if name == "ping" {
				continue // it goes on to dial
			}
			for what, ok := range map[string]error{
				"loopback": v([]string{"127.0.0.1:9092", "localhost:9093", "[::1]:9094"}, sec),
				"tls":      v(remote, kafka.Security{TLS: tlsconfig.Config{Enabled: true}, SASL: sec.SASL}),
				"allowed":  v(remote, kafka.Security{SASL: sec.SASL, AllowCleartextCredentials: true}),
			} {
				if ok != nil {
					t.Errorf("%s, %s, %s: %v, want it accepted", name, mech, what, ok)
				}
			}
		}
	}
	env := map[string]string{kafka.EnvSASLMechanism: "PLAIN", kafka.EnvSASLUsername: "u", kafka.EnvSASLPassword: "p", tlsconfig.EnvAllowCleartextCredentials: "1"}
	sec, err := kafka.SecurityFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || !sec.AllowCleartextCredentials || sec.ValidateFor(remote) != nil {
		t.Errorf("SecurityFromEnv with %s=1: %+v, %v; want cleartext allowed", tlsconfig.EnvAllowCleartextCredentials, sec.AllowCleartextCredentials, err)
	}
}
