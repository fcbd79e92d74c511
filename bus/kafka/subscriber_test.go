package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// newAdmin returns a cluster admin on brokers, closed when t ends.
func newAdmin(t *testing.T, brokers []string) sarama.ClusterAdmin {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = kafka.KafkaVersion
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatalf("cluster admin on %v: %v", brokers, err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}

// createTopicWith creates a topic of partitions partitions and returns
// its name.
func createTopicWith(t *testing.T, brokers []string, prefix string, partitions int32) string {
	t.Helper()
	topic := testenv.UniqueName(t, prefix)
	if err := newAdmin(t, brokers).CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	return topic
}

// partitionCount returns topic's partition count from the metadata of
// brokers, or -1 when the topic does not exist.
func partitionCount(t *testing.T, brokers []string, topic string) int {
	t.Helper()
	metas, err := newAdmin(t, brokers).DescribeTopics([]string{topic})
	if err != nil {
		t.Fatalf("describe topic %s: %v", topic, err)
	}
	if len(metas) != 1 {
		t.Fatalf("describe topic %s: %d answers", topic, len(metas))
	}
	if errors.Is(metas[0].Err, sarama.ErrUnknownTopicOrPartition) {
		return -1
	}
	if metas[0].Err != sarama.ErrNoError {
		t.Fatalf("describe topic %s: %v", topic, metas[0].Err)
	}
	return len(metas[0].Partitions)
}

// readAll returns every record on topic, per partition.
func readAll(t *testing.T, brokers []string, topic string) map[int32][]*sarama.ConsumerMessage {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = kafka.KafkaVersion
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32][]*sarama.ConsumerMessage{}
	for _, p := range parts {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if end == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for len(out[p]) < int(end) {
			select {
			case rec := <-pc.Messages():
				out[p] = append(out[p], rec)
			case <-time.After(integration.HangAfter()):
				t.Fatalf("%s/%d: read %d of %d records, then none for %v (%s)", topic, p, len(out[p]), end, integration.HangAfter(), integration.EnvHangAfter)
			}
		}
		_ = pc.Close()
	}
	return out
}

func TestMarshalerKeysRecordsOnlyByAPartitionKey(t *testing.T) {
	unkeyed := message.NewMessage("u", []byte("x"))
	rec, err := kafka.Marshaler.Marshal("t", unkeyed)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Key != nil {
		t.Errorf("a message without a partition key got record key %#v, want none (a random partition)", rec.Key)
	}
	keyed := message.NewMessage("k", []byte("x"))
	keyed.Metadata.Set(bus.MetadataPartitionKey, "order-7")
	rec, err = kafka.Marshaler.Marshal("t", keyed)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Key == nil {
		t.Fatal("a message with a partition key got no record key")
	}
	if key, _ := rec.Key.Encode(); string(key) != "order-7" {
		t.Errorf("record key %q, want the partition key order-7", key)
	}
	back, err := kafka.Marshaler.Unmarshal(&sarama.ConsumerMessage{Key: []byte("order-7"), Value: []byte("x"), Headers: headers(rec.Headers)})
	if err != nil {
		t.Fatal(err)
	}
	if back.UUID != "k" || back.Metadata.Get(bus.MetadataPartitionKey) != "order-7" {
		t.Errorf("round trip: uuid %q metadata %v", back.UUID, back.Metadata)
	}
}

func headers(in []sarama.RecordHeader) []*sarama.RecordHeader {
	out := make([]*sarama.RecordHeader, len(in))
	for i := range in {
		out[i] = &in[i]
	}
	return out
}

// TestUnkeyedMessagesSpreadAndEachKeyStaysOnOnePartition publishes 60
// messages without a partition key and 10 messages for each of 6 keys to
// a topic of 6 partitions: the unkeyed ones land on more than one
// partition with no record key, and all the records of a key on one
// partition, in publish order.
func TestUnkeyedMessagesSpreadAndEachKeyStaysOnOnePartition(t *testing.T) {
	const partitions, unkeyed, keys, perKey = 6, 60, 6, 10
	brokers := testenv.KafkaBrokers(t)
	topic := createTopicWith(t, brokers, "spread", partitions)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var msgs []*message.Message
	for i := range unkeyed {
		msgs = append(msgs, message.NewMessage(fmt.Sprintf("u%d", i), []byte("x")))
	}
	for i := range perKey {
		for k := range keys {
			m := message.NewMessage(fmt.Sprintf("k%d-%d", k, i), []byte(fmt.Sprint(i)))
			m.Metadata.Set(bus.MetadataPartitionKey, fmt.Sprintf("key-%d", k))
			msgs = append(msgs, m)
		}
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatal(err)
	}

	unkeyedOn := map[int32]int{}
	withKey := 0 // unkeyed messages with a (non-null) record key
	keyOn := map[string][]int32{}
	next := map[string]int{}
	for p, recs := range readAll(t, brokers, topic) {
		for _, rec := range recs {
			msg, err := kafka.Marshaler.Unmarshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			key := msg.Metadata.Get(bus.MetadataPartitionKey)
			if key == "" {
				if rec.Key != nil {
					withKey++
				}
				unkeyedOn[p]++
				continue
			}
			if string(rec.Key) != key {
				t.Errorf("message %s of key %s has record key %q", msg.UUID, key, rec.Key)
			}
			if !slices.Contains(keyOn[key], p) {
				keyOn[key] = append(keyOn[key], p)
			}
			if got := string(rec.Value); got != fmt.Sprint(next[key]) {
				t.Errorf("key %s: record #%s where #%d was due", key, got, next[key])
			}
			next[key]++
		}
	}
	t.Logf("unkeyed messages per partition: %v; partitions of each key: %v", unkeyedOn, keyOn)
	if total := sum(unkeyedOn); total != unkeyed {
		t.Fatalf("found %d unkeyed records, want %d", total, unkeyed)
	}
	if withKey > 0 {
		t.Errorf("%d of %d unkeyed messages have a record key, want none", withKey, unkeyed)
	}
	if len(unkeyedOn) < 2 {
		t.Errorf("all %d unkeyed messages landed on partition(s) %v, want them spread", unkeyed, unkeyedOn)
	}
	if len(keyOn) != keys {
		t.Fatalf("found %d keys, want %d", len(keyOn), keys)
	}
	for key, parts := range keyOn {
		if len(parts) != 1 || next[key] != perKey {
			t.Errorf("key %s: %d records on partitions %v, want %d on one", key, next[key], parts, perKey)
		}
	}
}

func sum(m map[int32]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestSubscribeInitializeCreatesMissingTopicsWithBrokerDefaults runs a
// broker that creates no topic on its own and makes 5 partitions by
// default: SubscribeInitialize creates a missing topic with 5 partitions,
// succeeds again on it, and leaves a topic that exists with 2 as it is.
func TestSubscribeInitializeCreatesMissingTopicsWithBrokerDefaults(t *testing.T) {
	broker := testservers.StartKafkaBrokerWithConfig(t, testservers.KafkaBrokerConfig{
		DataDir: t.TempDir(), Partitions: 5, Args: []string{"--no-auto-create-topics"}})
	brokers := []string{broker.Addr}
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g", Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	topic := testenv.UniqueName(t, "init")
	if n := partitionCount(t, brokers, topic); n != -1 {
		t.Fatalf("topic %s exists before SubscribeInitialize with %d partitions", topic, n)
	}
	for i := range 2 {
		if err := sub.SubscribeInitialize(topic); err != nil {
			t.Fatalf("SubscribeInitialize #%d: %v", i+1, err)
		}
		if n := partitionCount(t, brokers, topic); n != 5 {
			t.Fatalf("after SubscribeInitialize #%d the topic has %d partitions, want the broker's default 5", i+1, n)
		}
	}
	existing := createTopicWith(t, brokers, "init-existing", 2)
	if err := sub.SubscribeInitialize(existing); err != nil {
		t.Fatalf("SubscribeInitialize on an existing topic: %v", err)
	}
	if n := partitionCount(t, brokers, existing); n != 2 {
		t.Fatalf("the existing topic has %d partitions after SubscribeInitialize, want its 2", n)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitClosed fails t unless ch is closed within integration.HangAfter
// (messages still arriving are nacked).
func waitClosed(t *testing.T, ch <-chan *message.Message) {
	t.Helper()
	d := integration.HangAfter()
	deadline := time.After(d)
	for {
		select {
		case m, open := <-ch:
			if !open {
				return
			}
			m.Nack()
		case <-deadline:
			t.Fatalf("the channel is still open after %s", d)
		}
	}
}

// waitMembers waits until group has n members and returns their ids.
func waitMembers(t *testing.T, obs *testenv.GroupObserver, group string, n int) []string {
	t.Helper()
	var ids []string
	integration.Await(t, fmt.Sprintf("group %s with %d members", group, n), func() error {
		snap, err := obs.Describe(group)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Members) != n {
			return fmt.Errorf("group %s", snap)
		}
		ids = make([]string, n)
		for i, m := range snap.Members {
			ids[i] = m.ID
		}
		return nil
	})
	return ids
}

// TestSubscriptionStopsWhenItsContextEnds runs two subscriptions of one
// Subscriber in one group and cancels the first one's context: without
// Close, its channel closes, its member leaves the group and the
// Subscriber forgets it, while the second still gets new messages; Close
// then stops the second.
func TestSubscriptionStopsWhenItsContextEnds(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := createTopicWith(t, brokers, "subctx", 2)
	group := topic + "-group"
	obs := testenv.NewGroupObserver(t, brokers)
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: group, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	first, err := sub.Subscribe(ctx1, topic)
	if err != nil {
		t.Fatal(err)
	}
	second, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	waitMembers(t, obs, group, 2)
	if n := kafka.SubscriptionCount(sub); n != 2 {
		t.Fatalf("the Subscriber holds %d subscriptions, want 2", n)
	}

	cancel1()
	waitClosed(t, first)
	waitMembers(t, obs, group, 1)
	// The Subscriber forgets the stopped subscription once its stop has
	// returned, just after the channel closed.
	integration.Await(t, "the Subscriber to forget the stopped subscription", func() error {
		if n := kafka.SubscriptionCount(sub); n != 1 {
			return fmt.Errorf("the Subscriber holds %d subscriptions, want 1", n)
		}
		return nil
	})

	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	want := map[string]bool{}
	for i := range 4 {
		m := message.NewMessage(fmt.Sprintf("after-%d", i), []byte("x"))
		m.Metadata.Set(bus.MetadataPartitionKey, fmt.Sprintf("key-%d", i))
		want[m.UUID] = true
		if err := pub.Publish(topic, m); err != nil {
			t.Fatal(err)
		}
	}
	for len(want) > 0 {
		select {
		case m, open := <-second:
			if !open {
				t.Fatal("the second subscription's channel closed")
			}
			delete(want, m.UUID)
			m.Ack()
		case <-time.After(integration.HangAfter()):
			t.Fatalf("the second subscription got no message for %v (%s), still waiting for %v", integration.HangAfter(), integration.EnvHangAfter, want)
		}
	}

	start := time.Now()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close stopped the second subscription in %s", time.Since(start).Round(time.Millisecond))
	waitClosed(t, second)
	waitMembers(t, obs, group, 0)
	if _, err := sub.Subscribe(context.Background(), topic); err == nil {
		t.Error("Subscribe after Close succeeded")
	}
}

// TestInitialOffsetNewestAppliesOnlyToUncommittedPartitions: a group set
// to start at the newest offset never gets a record written before it
// first joined, gets those written later; once it has committed, a new
// member resumes from the commit and gets a record written while the
// group had no member.
func TestInitialOffsetNewestAppliesOnlyToUncommittedPartitions(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := createTopicWith(t, brokers, "newest", 1)
	group := topic + "-group"
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	publish := func(id string) {
		t.Helper()
		if err := pub.Publish(topic, message.NewMessage(id, []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	publish("before")
	cfg := kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: group, InitialOffset: sarama.OffsetNewest, Logger: watermill.NopLogger{}}
	sub, err := kafka.NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	consumeNewest(t, sub, topic, publish, func(records int64) { testenv.WaitCommitted(t, brokers, group, topic, records) })
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}

	publish("while-away")
	sub, err = kafka.NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		if m.UUID != "while-away" {
			t.Fatalf("the group resumed with %s, want while-away (its committed offset)", m.UUID)
		}
		m.Ack()
	case <-ctx.Done():
		t.Fatalf("the group did not resume from its committed offset within %v (%s)", integration.HangAfter(), integration.EnvHangAfter)
	}
}

// consumeNewest subscribes with sub, a subscriber starting at the newest
// offset of a one-partition topic that holds one record ("before"), and
// publishes "after-N" every 300 ms until a message arrives: it fails t if
// "before" arrives, or nothing within integration.HangAfter. It acks every message up to
// the last one published, then calls committed with the number of
// records on the topic, to wait for their commit, and cancels the
// subscription.
func consumeNewest(t *testing.T, sub message.Subscriber, topic string, publish func(id string), committed func(records int64)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	published, last := 0, ""
	for {
		select {
		case <-tick.C:
			if last == "" { // nothing arrived yet
				published++
				publish(fmt.Sprintf("after-%d", published-1))
			}
			continue
		case m, open := <-msgs:
			if !open {
				t.Fatal("the channel closed")
			}
			if m.UUID == "before" {
				t.Fatal("a group starting at the newest offset got a record written before it joined")
			}
			m.Ack()
			last = fmt.Sprintf("after-%d", published-1)
			if m.UUID != last {
				continue
			}
		case <-ctx.Done():
			t.Fatalf("no message within %v (%s; %d published)", integration.HangAfter(), integration.EnvHangAfter, published)
		}
		break
	}
	committed(int64(1 + published))
}
