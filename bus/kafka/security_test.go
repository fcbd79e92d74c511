package kafka_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/kafkatest"
	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// Users of the secured test cluster, one per SASL mechanism.
const (
	scram512User, scram512Pass = "eventpipe", "s3cret-512"
	scram256User, scram256Pass = "alice", "s3cret-256"
	plainUser, plainPass       = "bob", "s3cret-plain"
)

// secureCluster is an in-process kfake broker that speaks only TLS (with
// a certificate of a throwaway CA) and wants SASL authentication.
type secureCluster struct {
	brokers []string
	caFile  string // the CA that issued the broker's certificate
	otherCA string // a CA the broker's certificate does not come from
}

func startSecureCluster(t *testing.T) secureCluster {
	t.Helper()
	dir := t.TempDir()
	files, err := certs.WriteServer(dir, "eventpipe test CA", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.WriteServer(filepath.Join(dir, "other"), "some other CA", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	sc := secureCluster{caFile: files.CAFile, otherCA: other.CAFile}
	sc.brokers = kafkatest.StartCluster(t, kafkatest.ClusterConfig{
		Certificate: &files.Cert,
		Users: []kafkatest.User{
			{Mechanism: kafka.SASLScramSHA512, Name: scram512User, Password: scram512Pass},
			{Mechanism: kafka.SASLScramSHA256, Name: scram256User, Password: scram256Pass},
			{Mechanism: kafka.SASLPlain, Name: plainUser, Password: plainPass},
		},
		AutoCreateTopics: true,
		Partitions:       3,
	})
	return sc
}

// security is the right Security for the cluster with mechanism.
func (c secureCluster) security(mechanism string) kafka.Security {
	s := kafka.Security{TLS: tlsconfig.Config{CAFile: c.caFile}, SASL: kafka.SASL{Mechanism: mechanism}}
	switch mechanism {
	case kafka.SASLScramSHA512:
		s.SASL.Username, s.SASL.Password = scram512User, scram512Pass
	case kafka.SASLScramSHA256:
		s.SASL.Username, s.SASL.Password = scram256User, scram256Pass
	case kafka.SASLPlain:
		s.SASL.Username, s.SASL.Password = plainUser, plainPass
	}
	return s
}

// TestSecureClusterEveryClient runs every client bus/kafka builds against
// a TLS + SCRAM-SHA-512 broker: topic creation, the group start, the
// publisher, the lag and topic counts, the offset reader, the lag monitor, the subscriber,
// the keyed subscriber and the Sender.
func TestSecureClusterEveryClient(t *testing.T) {
	c := startSecureCluster(t)
	sec := c.security(kafka.SASLScramSHA512)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	const topic, group = "secure-events", "secure-group"

	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: c.brokers, ConsumerGroup: group, Security: sec, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatalf("SubscribeInitialize: %v", err)
	}
	did, err := kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: c.brokers, Security: sec, Group: group, Topics: []string{topic}, Start: bus.StartEarliest})
	if err != nil || !did {
		t.Fatalf("StartGroup = %v, %v; want true, nil", did, err)
	}

	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: c.brokers, Security: sec, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	msg := message.NewMessage(watermill.NewULID(), []byte("over tls and scram"))
	msg.Metadata.Set(bus.MetadataPartitionKey, "k")
	if err := pub.Publish(topic, msg); err != nil {
		t.Fatalf("publish: %v", err)
	}

	cluster := kafka.Cluster{Brokers: c.brokers, Security: sec}
	rows, err := kafka.ConsumerLag(ctx, cluster, group, []string{topic})
	if err != nil {
		t.Fatalf("ConsumerLag: %v", err)
	}
	if got := totalLag(rows); got != 1 {
		t.Fatalf("lag = %d (%+v), want 1", got, rows)
	}
	counts, err := kafka.TopicMessages(ctx, cluster, []string{topic})
	if err != nil || counts[topic] != 1 {
		t.Fatalf("TopicMessages = %v, %v; want %s: 1", counts, err, topic)
	}
	reader, err := kafka.NewOffsetReader(cluster)
	if err != nil {
		t.Fatal(err)
	}
	read, err := reader.Read(ctx, kafka.OffsetsRequest{Groups: []kafka.GroupTopics{{Group: group, Topics: []string{topic}}}, Count: []string{topic}})
	reader.Close()
	if err != nil || len(read.Groups) != 1 || totalLag(read.Groups[0].Rows) != 1 || read.Messages[topic] != 1 {
		t.Fatalf("OffsetReader.Read = %+v, %v; want a lag of 1 and 1 record", read, err)
	}

	if err := kafka.Ping(ctx, cluster); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	var records []kafka.Record
	err = kafka.ReadTopic(ctx, cluster, topic, time.Time{}, func(r kafka.Record) bool { records = append(records, r); return true })
	if err != nil || len(records) != 1 || string(records[0].Value) != "over tls and scram" || string(records[0].Key) != "k" ||
		!slices.ContainsFunc(records[0].Headers, func(h kafka.RecordHeader) bool { return string(h.Value) == msg.UUID }) {
		t.Fatalf("ReadTopic = %+v, %v; want the one record, keyed k, with its UUID in a header", records, err)
	}
	topicReader, err := kafka.NewTopicReader(ctx, kafka.TopicReaderConfig{Cluster: cluster, Topics: []string{topic}, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var tailed []kafka.Record
	for len(tailed) == 0 {
		recs, err := topicReader.Poll(ctx)
		if err != nil {
			t.Fatalf("TopicReader.Poll: %v", err)
		}
		tailed = append(tailed, recs...)
	}
	topicReader.Close()
	if len(tailed) != 1 || tailed[0].Partition != records[0].Partition || tailed[0].Offset != records[0].Offset {
		t.Fatalf("TopicReader read %+v, want the record ReadTopic read (%+v)", tailed, records[0])
	}
	consumeBatches(ctx, t, cluster, "secure-batches", topic, 1)

	mon, err := kafka.NewLagMonitor(kafka.LagConfig{Brokers: c.brokers, Security: sec, ConsumerGroup: group, Topics: []string{topic}, Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	monCtx, stopMon := context.WithCancel(ctx)
	monDone := make(chan error, 1)
	go func() { monDone <- mon.Run(monCtx) }()
	for mon.Last() == nil && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	stopMon()
	<-monDone
	if got := totalLag(mon.Last()); got != 1 {
		t.Fatalf("lag monitor measured %d (%+v), want 1", got, mon.Last())
	}

	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	select {
	case got := <-msgs:
		got.Ack()
		if string(got.Payload) != "over tls and scram" || got.UUID != msg.UUID {
			t.Fatalf("received %s %q, want %s %q", got.UUID, got.Payload, msg.UUID, msg.Payload)
		}
	case <-ctx.Done():
		t.Fatal("the subscriber received nothing")
	}
	describer, err := kafka.NewOffsetReader(cluster)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := describer.DescribeGroup(ctx, group)
	describer.Close()
	if err != nil || len(desc.Members) != 1 || len(desc.Members[0].Partitions[topic]) == 0 {
		t.Fatalf("DescribeGroup = %+v, %v; want the subscriber's member with the topic's partitions", desc, err)
	}

	ks, err := keyed.New(keyed.Config{Brokers: c.brokers, ConsumerGroup: "secure-keyed", Security: sec, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	kmsgs, err := ks.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("keyed Subscribe: %v", err)
	}
	select {
	case got := <-kmsgs:
		got.Ack()
		if got.UUID != msg.UUID {
			t.Fatalf("keyed subscriber received %s, want %s", got.UUID, msg.UUID)
		}
	case <-ctx.Done():
		t.Fatal("the keyed subscriber received nothing")
	}

	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: c.brokers, Security: sec, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	defer sender.Close()
	cmd := commands.New("Ping", "secure", "a-1", json.RawMessage(`{}`))
	if err := sender.Send(ctx, cmd); err != nil {
		t.Fatalf("Send: %v", err)
	}
	cmdTopic := cmd.Topic(bus.Topics{})
	if counts, err := kafka.TopicMessages(ctx, cluster, []string{cmdTopic}); err != nil || counts[cmdTopic] != 1 {
		t.Fatalf("TopicMessages(%s) = %v, %v; want 1", cmdTopic, counts, err)
	}
}

// consumeBatches reads want records of topic as a member of group with a
// kafka.GroupConsumer on cluster, marking each batch, and checks that the
// group committed them.
func consumeBatches(ctx context.Context, t *testing.T, cluster kafka.Cluster, group, topic string, want int) {
	t.Helper()
	gc, err := kafka.NewGroupConsumer(kafka.GroupConsumerConfig{Subscriber: kafka.SubscriberConfig{
		Brokers: cluster.Brokers, Security: cluster.Security, ConsumerGroup: group}})
	if err != nil {
		t.Fatalf("NewGroupConsumer: %v", err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu  sync.Mutex
		got []kafka.Record
	)
	handle := func(ctx context.Context, claim *kafka.Claim) error {
		for {
			batch, open := claim.Batch(ctx, 10, 50*time.Millisecond)
			if len(batch) > 0 {
				if batch[0].Topic != claim.Topic() || batch[0].Partition != claim.Partition() {
					t.Errorf("claim of %s/%d got a record of %s/%d", claim.Topic(), claim.Partition(), batch[0].Topic, batch[0].Partition)
				}
				claim.Mark(batch[len(batch)-1])
				mu.Lock()
				got = append(got, batch...)
				if len(got) >= want {
					stop()
				}
				mu.Unlock()
			}
			if !open || ctx.Err() != nil {
				return nil
			}
		}
	}
	for sctx.Err() == nil {
		if err := gc.Consume(sctx, []string{topic}, handle); err != nil && sctx.Err() == nil {
			t.Fatalf("GroupConsumer.Consume: %v", err)
		}
	}
	if err := gc.Close(); err != nil {
		t.Fatalf("GroupConsumer.Close: %v", err)
	}
	if err := gc.Consume(ctx, []string{topic}, handle); !errors.Is(err, kafka.ErrGroupConsumerClosed) {
		t.Fatalf("Consume after Close = %v, want ErrGroupConsumerClosed", err)
	}
	if len(got) != want {
		t.Fatalf("GroupConsumer read %d records, want %d", len(got), want)
	}
	rows, err := kafka.ConsumerLag(ctx, cluster, group, []string{topic})
	if err != nil || totalLag(rows) != 0 {
		t.Fatalf("after GroupConsumer: lag %+v, %v; want 0", rows, err)
	}
}

// TestSecureClusterMechanisms connects with each SASL mechanism the
// broker has a user for, through sarama (producer, lag) and franz-go
// (StartGroup).
func TestSecureClusterMechanisms(t *testing.T) {
	c := startSecureCluster(t)
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			sec := c.security(mech)
			ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
			defer cancel()
			topic, group := "mech-"+mech, "mech-group-"+mech
			did, err := kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: c.brokers, Security: sec, Group: group, Topics: []string{topic}, Start: bus.StartEarliest})
			if err != nil || !did {
				t.Fatalf("StartGroup = %v, %v; want true, nil", did, err)
			}
			pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: c.brokers, Security: sec, Logger: watermill.NopLogger{}})
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			if err := pub.Publish(topic, message.NewMessage(watermill.NewULID(), []byte(mech))); err != nil {
				t.Fatalf("publish: %v", err)
			}
			rows, err := kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: c.brokers, Security: sec}, group, []string{topic})
			if err != nil || totalLag(rows) != 1 {
				t.Fatalf("ConsumerLag = %+v, %v; want a lag of 1", rows, err)
			}
		})
	}
}

// TestSecureClusterRefusesWrongSettings shows that every client fails,
// with an error saying what is wrong and without hanging, when its
// settings do not fit the broker: a wrong password, a CA that did not
// issue the broker's certificate, no SASL at all, plain text against the
// TLS listener.
func TestSecureClusterRefusesWrongSettings(t *testing.T) {
	testenv.Integration(t)
	c := startSecureCluster(t)
	good := c.security(kafka.SASLScramSHA512)
	wrongPassword := good
	wrongPassword.SASL.Password = "not-the-password"
	unknownCA := good
	unknownCA.TLS.CAFile = c.otherCA
	noCredentials := good
	noCredentials.SASL = kafka.SASL{}
	plainText := good
	plainText.TLS = tlsconfig.Config{}

	cases := []struct {
		name string
		sec  kafka.Security
		want []string // the error mentions one of these
	}{
		{"wrong password", wrongPassword, []string{"authentication"}},
		{"unknown CA", unknownCA, []string{"certificate"}},
		{"no credentials", noCredentials, []string{"authentication"}},
		{"plain text against TLS", plainText, []string{"TLS"}},
	}
	const topic, group = "refused", "refused-group"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clients := []struct {
				name string
				run  func(ctx context.Context) error
			}{
				{"publisher", func(context.Context) error {
					pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: c.brokers, Security: tc.sec, Logger: watermill.NopLogger{}})
					if err == nil {
						pub.Close()
					}
					return err
				}},
				{"subscriber topic creation", func(context.Context) error {
					sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: c.brokers, ConsumerGroup: group, Security: tc.sec, Logger: watermill.NopLogger{}})
					if err != nil {
						return err
					}
					defer sub.Close()
					return sub.SubscribeInitialize(topic)
				}},
				{"keyed topic creation", func(context.Context) error {
					sub, err := keyed.New(keyed.Config{Brokers: c.brokers, ConsumerGroup: group, Security: tc.sec, Logger: watermill.NopLogger{}})
					if err != nil {
						return err
					}
					defer sub.Close()
					return sub.SubscribeInitialize(topic)
				}},
				{"sender", func(context.Context) error {
					s, err := kafka.NewSender(kafka.SenderConfig{Brokers: c.brokers, Security: tc.sec, Logger: watermill.NopLogger{}})
					if err == nil {
						s.Close()
					}
					return err
				}},
				{"consumer lag", func(ctx context.Context) error {
					_, err := kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: c.brokers, Security: tc.sec}, group, []string{topic})
					return err
				}},
				{"topic messages", func(ctx context.Context) error {
					_, err := kafka.TopicMessages(ctx, kafka.Cluster{Brokers: c.brokers, Security: tc.sec}, []string{topic})
					return err
				}},
				{"offset reader", func(ctx context.Context) error {
					r, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: c.brokers, Security: tc.sec})
					if err != nil {
						return err
					}
					defer r.Close()
					_, err = r.Read(ctx, kafka.OffsetsRequest{Groups: []kafka.GroupTopics{{Group: group, Topics: []string{topic}}}})
					return err
				}},
				{"ping", func(ctx context.Context) error {
					return kafka.Ping(ctx, kafka.Cluster{Brokers: c.brokers, Security: tc.sec})
				}},
				{"read topic", func(ctx context.Context) error {
					return kafka.ReadTopic(ctx, kafka.Cluster{Brokers: c.brokers, Security: tc.sec}, topic, time.Time{}, func(kafka.Record) bool { return true })
				}},
				{"topic reader", func(ctx context.Context) error {
					r, err := kafka.NewTopicReader(ctx, kafka.TopicReaderConfig{Cluster: kafka.Cluster{Brokers: c.brokers, Security: tc.sec}, Topics: []string{topic}})
					if err == nil {
						r.Close()
					}
					return err
				}},
				{"describe group", func(ctx context.Context) error {
					r, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: c.brokers, Security: tc.sec})
					if err != nil {
						return err
					}
					defer r.Close()
					_, err = r.DescribeGroup(ctx, group)
					return err
				}},
				{"group consumer", func(context.Context) error {
					gc, err := kafka.NewGroupConsumer(kafka.GroupConsumerConfig{Subscriber: kafka.SubscriberConfig{Brokers: c.brokers, ConsumerGroup: group, Security: tc.sec}})
					if err == nil {
						gc.Close()
					}
					return err
				}},
				{"group start", func(ctx context.Context) error {
					_, err := kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: c.brokers, Security: tc.sec, Group: group, Topics: []string{topic}, Start: bus.StartEarliest})
					return err
				}},
			}
			for _, cl := range clients {
				t.Run(cl.name, func(t *testing.T) {
					err := failsWithin(t, integration.HangAfter(), cl.run)
					if err == nil {
						t.Fatal("connected with wrong settings")
					}
					if !mentionsAny(err, tc.want) {
						t.Fatalf("error does not mention %q: %v", tc.want, err)
					}
					if strings.Contains(err.Error(), tc.sec.SASL.Password) && tc.sec.SASL.Password != "" {
						t.Fatalf("error shows the password: %v", err)
					}
					t.Logf("%v", err)
				})
			}
		})
	}
}

// failsWithin runs fn with a context that ends after bound and returns
// its error; fn still running well after the bound is a hang, and fails
// the test.
func failsWithin(t *testing.T, bound time.Duration, fn func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		if ctx.Err() != nil {
			t.Fatalf("did not fail before its context ended (%v): %v", bound, err)
		}
		return err
	case <-time.After(bound + 10*time.Second):
		t.Fatalf("still connecting %v after its context ended", 10*time.Second)
		return nil
	}
}

func mentionsAny(err error, words []string) bool {
	for _, w := range words {
		if strings.Contains(strings.ToLower(err.Error()), strings.ToLower(w)) {
			return true
		}
	}
	return false
}

// TestSecurityValidateRejectsBadSettings checks Validate, and that every
// client's config validates its Security, as an
// *eventstore.ValidationError.
func TestSecurityValidateRejectsBadSettings(t *testing.T) {
	cases := map[string]kafka.Security{
		"unknown mechanism":         {SASL: kafka.SASL{Mechanism: "GSSAPI", Username: "u", Password: "p"}},
		"missing password":          {SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, Username: "u"}},
		"missing username":          {SASL: kafka.SASL{Mechanism: kafka.SASLPlain, Password: "p"}},
		"credentials, no mechanism": {SASL: kafka.SASL{Username: "u", Password: "p"}},
		"cert without key":          {TLS: tlsconfig.Config{CertFile: "client.pem"}},
		"bad TLS version":           {TLS: tlsconfig.Config{Enabled: true, MinVersion: "1.1"}},
		"MSK without region":        {SASL: kafka.SASL{Mechanism: kafka.SASLAWSMSKIAM}},
		"MSK role and profile": {SASL: kafka.SASL{Mechanism: kafka.SASLAWSMSKIAM, AWSRegion: "us-east-1",
			AWSRoleARN: "arn:aws:iam::123456789012:role/r", AWSProfile: "p"}},
	}
	brokers := []string{"127.0.0.1:1"}
	for name, sec := range cases {
		t.Run(name, func(t *testing.T) {
			var ve *eventstore.ValidationError
			if err := sec.Validate(); !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a *eventstore.ValidationError", err)
			}
			if err := sec.ApplySarama(sarama.NewConfig()); !errors.As(err, &ve) {
				t.Errorf("ApplySarama = %v, want a *eventstore.ValidationError", err)
			}
			if _, err := sec.KgoOpts(); !errors.As(err, &ve) {
				t.Errorf("KgoOpts = %v, want a *eventstore.ValidationError", err)
			}
			for cfg, err := range map[string]error{
				"PublisherConfig":     kafka.PublisherConfig{Brokers: brokers, Security: sec}.Validate(),
				"SubscriberConfig":    subscriberValidate(brokers, sec),
				"SenderConfig":        kafka.SenderConfig{Brokers: brokers, Security: sec}.Validate(),
				"LagConfig":           kafka.LagConfig{Brokers: brokers, Security: sec, ConsumerGroup: "g", Topics: []string{"t"}}.Validate(),
				"GroupStartConfig":    kafka.GroupStartConfig{Brokers: brokers, Security: sec, Group: "g", Topics: []string{"t"}, Start: bus.StartEarliest}.Validate(),
				"keyed.Config":        keyedValidate(brokers, sec),
				"GroupConsumerConfig": kafka.GroupConsumerConfig{Subscriber: kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g", Security: sec}}.Validate(),
				"TopicReaderConfig":   kafka.TopicReaderConfig{Cluster: kafka.Cluster{Brokers: brokers, Security: sec}, Topics: []string{"t"}}.Validate(),
			} {
				if !errors.As(err, &ve) {
					t.Errorf("%s.Validate = %v, want a *eventstore.ValidationError", cfg, err)
				}
			}
			if _, err := kafka.ConsumerLag(context.Background(), kafka.Cluster{Brokers: brokers, Security: sec}, "g", []string{"t"}); !errors.As(err, &ve) {
				t.Errorf("ConsumerLag = %v, want a *eventstore.ValidationError", err)
			}
			if _, err := kafka.TopicMessages(context.Background(), kafka.Cluster{Brokers: brokers, Security: sec}, []string{"t"}); !errors.As(err, &ve) {
				t.Errorf("TopicMessages = %v, want a *eventstore.ValidationError", err)
			}
			if _, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: brokers, Security: sec}); !errors.As(err, &ve) {
				t.Errorf("NewOffsetReader = %v, want a *eventstore.ValidationError", err)
			}
			if err := kafka.Ping(context.Background(), kafka.Cluster{Brokers: brokers, Security: sec}); !errors.As(err, &ve) {
				t.Errorf("Ping = %v, want a *eventstore.ValidationError", err)
			}
			if err := kafka.ReadTopic(context.Background(), kafka.Cluster{Brokers: brokers, Security: sec}, "t", time.Time{}, func(kafka.Record) bool { return true }); !errors.As(err, &ve) {
				t.Errorf("ReadTopic = %v, want a *eventstore.ValidationError", err)
			}
			if _, err := kafka.NewTopicReader(context.Background(), kafka.TopicReaderConfig{Cluster: kafka.Cluster{Brokers: brokers, Security: sec}, Topics: []string{"t"}}); !errors.As(err, &ve) {
				t.Errorf("NewTopicReader = %v, want a *eventstore.ValidationError", err)
			}
			if _, err := kafka.NewGroupConsumer(kafka.GroupConsumerConfig{Subscriber: kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g", Security: sec}}); !errors.As(err, &ve) {
				t.Errorf("NewGroupConsumer = %v, want a *eventstore.ValidationError", err)
			}
		})
	}
}

func subscriberValidate(brokers []string, sec kafka.Security) error {
	_, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g", Security: sec})
	return err
}

func keyedValidate(brokers []string, sec kafka.Security) error {
	_, err := keyed.New(keyed.Config{Brokers: brokers, ConsumerGroup: "g", Security: sec})
	return err
}

// TestSecurityStringHidesSecrets: String names the mechanism and user,
// never the password.
func TestSecurityStringHidesSecrets(t *testing.T) {
	s := kafka.Security{TLS: tlsconfig.Config{Enabled: true}, SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, Username: "u", Password: "hunter2"}}
	got := s.String()
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "SCRAM-SHA-512") || !strings.Contains(got, "tls") {
		t.Fatalf("String() = %q", got)
	}
}

// TestApplySaramaSettings checks the sarama settings of each mechanism
// and of TLS.
func TestApplySaramaSettings(t *testing.T) {
	c := sarama.NewConfig()
	c.Net.DialTimeout = 0
	if err := (kafka.Security{}).ApplySarama(c); err != nil {
		t.Fatal(err)
	}
	if c.Net.TLS.Enable || c.Net.SASL.Enable || c.Net.DialTimeout != kafka.DefaultDialTimeout {
		t.Fatalf("zero Security: TLS %v, SASL %v, dial timeout %v", c.Net.TLS.Enable, c.Net.SASL.Enable, c.Net.DialTimeout)
	}
	for mech, want := range map[string]sarama.SASLMechanism{
		kafka.SASLPlain:       sarama.SASLTypePlaintext,
		kafka.SASLScramSHA256: sarama.SASLTypeSCRAMSHA256,
		kafka.SASLScramSHA512: sarama.SASLTypeSCRAMSHA512,
	} {
		c := sarama.NewConfig()
		sec := kafka.Security{TLS: tlsconfig.Config{Enabled: true}, SASL: kafka.SASL{Mechanism: mech, Username: "u", Password: "p"}}
		if err := sec.ApplySarama(c); err != nil {
			t.Fatal(err)
		}
		if !c.Net.TLS.Enable || c.Net.TLS.Config == nil || !c.Net.SASL.Enable || !c.Net.SASL.Handshake ||
			c.Net.SASL.Mechanism != want || c.Net.SASL.User != "u" || c.Net.SASL.Password != "p" {
			t.Errorf("%s: TLS %v, SASL %v %v %s %q", mech, c.Net.TLS.Enable, c.Net.SASL.Enable, c.Net.SASL.Handshake, c.Net.SASL.Mechanism, c.Net.SASL.User)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: sarama rejects the config: %v", mech, err)
		}
	}
}

// TestMSKIAMWithInjectedSigner checks the OAUTHBEARER exchange both
// clients build for AWS_MSK_IAM, with the AWS signer replaced: sarama's
// token provider returns the signer's token (and reuses it), and
// franz-go's mechanism sends it as "auth=Bearer <token>".
func TestMSKIAMWithInjectedSigner(t *testing.T) {
	const token = "aHR0cHM6Ly9rYWZrYS51cy1lYXN0LTEuYW1hem9uYXdzLmNvbS8_QWN0aW9uPWthZmthLWNsdXN0ZXIlM0FDb25uZWN0"
	var calls int
	var got kafka.SASL
	restore := kafka.SetMSKSigner(func(ctx context.Context, s kafka.SASL) (string, int64, error) {
		calls++
		got = s
		return token, time.Now().Add(15 * time.Minute).UnixMilli(), nil
	})
	defer restore()
	sec := kafka.Security{TLS: tlsconfig.Config{Enabled: true}, SASL: kafka.SASL{Mechanism: kafka.SASLAWSMSKIAM, AWSRegion: "eu-west-1", AWSRoleARN: "arn:aws:iam::123456789012:role/msk"}}

	c := sarama.NewConfig()
	if err := sec.ApplySarama(c); err != nil {
		t.Fatal(err)
	}
	if c.Net.SASL.Mechanism != sarama.SASLTypeOAuth || !c.Net.SASL.Enable || !c.Net.SASL.Handshake || c.Net.SASL.TokenProvider == nil || !c.Net.TLS.Enable {
		t.Fatalf("sarama SASL: mechanism %s, enabled %v, handshake %v, provider %v, TLS %v",
			c.Net.SASL.Mechanism, c.Net.SASL.Enable, c.Net.SASL.Handshake, c.Net.SASL.TokenProvider, c.Net.TLS.Enable)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("sarama rejects the config: %v", err)
	}
	for range 2 {
		at, err := c.Net.SASL.TokenProvider.Token()
		if err != nil {
			t.Fatal(err)
		}
		if at.Token != token {
			t.Fatalf("sarama's access token = %q, want the signer's %q", at.Token, token)
		}
	}
	if calls != 1 {
		t.Errorf("the signer was called %d times for two tokens, want 1 (reuse until expiry)", calls)
	}
	if got.AWSRegion != "eu-west-1" || got.AWSRoleARN != sec.SASL.AWSRoleARN {
		t.Errorf("the signer got %+v", got)
	}

	first := kgoOAuthInitial(t, sec)
	if want := "n,,\x01auth=Bearer " + token + "\x01\x01"; string(first) != want {
		t.Fatalf("OAUTHBEARER initial response = %q, want %q", first, want)
	}

	restoreErr := kafka.SetMSKSigner(func(context.Context, kafka.SASL) (string, int64, error) {
		return "", 0, errors.New("no EC2 IMDS role found")
	})
	defer restoreErr()
	c = sarama.NewConfig()
	if err := sec.ApplySarama(c); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Net.SASL.TokenProvider.Token(); err == nil || !strings.Contains(err.Error(), "AWS_MSK_IAM") || !strings.Contains(err.Error(), "no EC2 IMDS role found") {
		t.Fatalf("a failing signer gave %v", err)
	}
}

// kgoOAuthInitial returns the initial client response of the SASL
// mechanism KgoOpts configures for sec.
func kgoOAuthInitial(t *testing.T, sec kafka.Security) []byte {
	t.Helper()
	opts, err := sec.KgoOpts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers("127.0.0.1:1"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	if len(mechs) != 1 || mechs[0].Name() != "OAUTHBEARER" {
		t.Fatalf("franz-go SASL mechanisms = %v, want one OAUTHBEARER", mechs)
	}
	_, first, err := mechs[0].Authenticate(context.Background(), "b-1.msk.example:9098")
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	return first
}

// TestMSKIAMRealSigner runs the real aws-msk-iam-sasl-signer-go with
// static credentials from the environment: it signs locally, without a
// network, a presigned kafka-cluster:Connect URL, base64url encoded.
func TestMSKIAMRealSigner(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	sec := kafka.Security{TLS: tlsconfig.Config{Enabled: true}, SASL: kafka.SASL{Mechanism: kafka.SASLAWSMSKIAM, AWSRegion: "us-east-1"}}

	c := sarama.NewConfig()
	if err := sec.ApplySarama(c); err != nil {
		t.Fatal(err)
	}
	at, err := c.Net.SASL.TokenProvider.Token()
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	checkMSKToken(t, at.Token)

	first := kgoOAuthInitial(t, sec)
	const prefix = "n,,\x01auth=Bearer "
	if !strings.HasPrefix(string(first), prefix) || !strings.HasSuffix(string(first), "\x01\x01") {
		t.Fatalf("OAUTHBEARER initial response = %q", first)
	}
	checkMSKToken(t, strings.TrimSuffix(strings.TrimPrefix(string(first), prefix), "\x01\x01"))
}

func checkMSKToken(t *testing.T, token string) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("token is not base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("token is not a URL: %v", err)
	}
	q := u.Query()
	if u.Host != "kafka.us-east-1.amazonaws.com" || !strings.Contains(u.RawQuery, "Action=kafka-cluster%3AConnect") ||
		q.Get("X-Amz-Signature") == "" || !strings.HasPrefix(q.Get("X-Amz-Credential"), "AKIDEXAMPLE/") ||
		!strings.Contains(q.Get("X-Amz-Credential"), "/us-east-1/kafka-cluster/") {
		t.Fatalf("token URL = %s", raw)
	}
}
