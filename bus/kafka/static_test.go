package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestAStaticMemberStoppedAndRestartedKeepsItsPartitions runs two static
// members, a and b, of one group on a 2-partition topic, stops a (a
// static member does not leave its group) and publishes to a's partition
// while it is down: b never gets those records, as it would if a had
// left and the group rebalanced; a restarted with the same InstanceID
// gets every one of them. A second subscription to the topic with the
// same InstanceID is refused.
func TestAStaticMemberStoppedAndRestartedKeepsItsPartitions(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := createTopicWith(t, brokers, "static", 2)
	group := topic + "-group"
	obs := testenv.NewGroupObserver(t, brokers)
	// The session outlives the test by far on any machine: a's stop must
	// not look like a crash whose session expires.
	member := func(id string) *kafka.Subscriber {
		sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: group, InstanceID: id,
			SessionTimeout: 4 * time.Minute, RebalanceTimeout: 10 * time.Second, Logger: watermill.NopLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		return sub
	}
	a, b := member("a"), member("b")
	aMsgs, err := a.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Subscribe(context.Background(), topic); !errors.As(err, new(*eventstore.ValidationError)) {
		t.Errorf("a second subscription to %s with InstanceID a: %v, want an *eventstore.ValidationError", topic, err)
	}
	bMsgs, err := b.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		gotB = map[string]bool{}
	)
	go func() {
		for m := range bMsgs {
			mu.Lock()
			gotB[m.UUID] = true
			mu.Unlock()
			m.Ack()
		}
	}()

	// Wait for a stable group of the two, and find a's partition.
	var aPartition int32 = -1
	integration.Await(t, "a stable group of a and b with a partition each", func() error {
		snap, err := obs.Describe(group)
		if err != nil {
			return err
		}
		if snap.State != "Stable" || len(snap.Members) != 2 {
			return fmt.Errorf("group %s", snap)
		}
		for _, m := range snap.Members {
			if len(m.Partitions[topic]) != 1 {
				return fmt.Errorf("group %s", snap)
			}
			if strings.HasPrefix(m.ID, "a."+topic) {
				aPartition = m.Partitions[topic][0]
			}
		}
		if aPartition < 0 {
			return fmt.Errorf("no member named a.%s in %s", topic, snap)
		}
		return nil
	})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, aMsgs)
	if snap, err := obs.Describe(group); err != nil || len(snap.Members) != 2 {
		t.Fatalf("after a stopped the group is %s (%v), want a still counted as a member", snap, err)
	}

	// Publish to a's partition while a is down.
	cfg := sarama.NewConfig()
	cfg.Version = kafka.KafkaVersion
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	want := map[string]bool{}
	for i := range 20 {
		id := fmt.Sprintf("while-a-down-%d", i)
		want[id] = true
		m := message.NewMessage(id, []byte("x"))
		rec, err := kafka.Marshaler.Marshal(topic, m)
		if err != nil {
			t.Fatal(err)
		}
		rec.Partition = aPartition
		if _, _, err := producer.SendMessage(rec); err != nil {
			t.Fatal(err)
		}
	}

	again, err := member("a").Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for len(want) > 0 {
		select {
		case m := <-again:
			delete(want, m.UUID)
			m.Ack()
		case <-time.After(integration.HangAfter()):
			t.Fatalf("the restarted a got nothing for %v (%s); still missing %d: group %s", integration.HangAfter(), integration.EnvHangAfter, len(want), describe(obs, group))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id := range gotB {
		if strings.HasPrefix(id, "while-a-down-") {
			t.Errorf("b got %s, published to a's partition %d while a was down: the group rebalanced", id, aPartition)
		}
	}
}

// describe renders group's state for a failure message.
func describe(obs *testenv.GroupObserver, group string) string {
	snap, err := obs.Describe(group)
	if err != nil {
		return err.Error()
	}
	return snap.String()
}
