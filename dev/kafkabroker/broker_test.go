package kafkabroker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/kafkabroker"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/eventstore"
)

func TestMain(m *testing.M) {
	testservers.RunChildIfRequested()
	os.Exit(m.Run())
}

func TestValidateRejectsNonLoopbackAndMissingDataDir(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   kafkabroker.Config
		field string // of the *eventstore.ValidationError
	}{
		{"public address", kafkabroker.Config{Addr: "0.0.0.0:9092", DataDir: "x", Partitions: 1}, "Addr"},
		{"no port", kafkabroker.Config{Addr: "127.0.0.1", DataDir: "x", Partitions: 1}, "Addr"},
		{"no data dir", kafkabroker.Config{Addr: "127.0.0.1:9092", Partitions: 1}, "DataDir"},
		{"bad port", kafkabroker.Config{Addr: "127.0.0.1:http", DataDir: "x", Partitions: 1}, "Addr"},
		{"zero partitions", kafkabroker.Config{Addr: "127.0.0.1:9092", DataDir: "x", Partitions: -1}, "Partitions"},
	} {
		err := tc.cfg.Validate()
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate() = %v, want an *eventstore.ValidationError on %s", tc.name, err, tc.field)
		}
	}
	if err := kafkabroker.Run(context.Background(), kafkabroker.Config{Addr: "10.0.0.1:9092", DataDir: t.TempDir()}); err == nil {
		t.Fatal("Run with a non-loopback address started a broker")
	}
}

// TestCommittedOffsetsAndMessagesSurviveKill9 publishes through
// watermill-kafka, consumes part of the topic in a consumer group, kills the
// broker process with SIGKILL, restarts it on the same data folder and
// checks that every record and the group's committed offsets are still
// there, and that the group resumes exactly where it left off.
func TestCommittedOffsetsAndMessagesSurviveKill9(t *testing.T) {
	testenv.Integration(t)
	const total, consumedBeforeKill = 90, 40
	broker := testservers.StartKafkaBroker(t, t.TempDir())
	brokers := []string{broker.Addr}
	topic, group := "survive-kill", "survive-kill-group"

	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for i := range total {
		msg := message.NewMessage(watermill.NewULID(), []byte(fmt.Sprintf(`{"n":%d}`, i)))
		msg.Metadata.Set(bus.MetadataPartitionKey, fmt.Sprintf("agg-%d", i%7))
		if err := pub.Publish(topic, msg); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		sent = append(sent, msg.UUID)
	}
	_ = pub.Close()

	// Consume and ack the first consumedBeforeKill messages in the group,
	// then wait until the broker reports them committed.
	acked := ids(testenv.Consume(t, brokers, group, topic, consumedBeforeKill))
	before := testenv.CommittedOffsets(t, brokers, group, topic)

	broker.Kill()
	broker.Start()

	after := testenv.CommittedOffsets(t, brokers, group, topic)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("committed offsets changed across kill -9: before %v, after %v", before, after)
	}
	// A fresh group sees every record that was published.
	all := ids(testenv.Consume(t, brokers, "survive-kill-audit", topic, total))
	if got, want := sortedCopy(all), sortedCopy(sent); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after restart the topic holds %d records, want the %d published", len(got), len(want))
	}
	// The original group resumes after its committed offsets: exactly the
	// messages it had not acked.
	rest := ids(testenv.Consume(t, brokers, group, topic, total-consumedBeforeKill))
	seen := map[string]int{}
	for _, id := range append(acked, rest...) {
		seen[id]++
	}
	for _, id := range sent {
		if seen[id] != 1 {
			t.Errorf("message %s delivered %d times to the group across the kill, want 1", id, seen[id])
		}
	}
}

func ids(msgs []*message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.UUID
	}
	return out
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}
