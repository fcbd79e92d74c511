package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
)

func TestPublisherAfterCloseFails(t *testing.T) {
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: testenv.KafkaBrokers(t), Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	err = pub.Publish(testenv.UniqueName(t, "closed"), message.NewMessage(watermill.NewULID(), []byte("x")))
	if !errors.Is(err, kafka.ErrPublisherClosed) {
		t.Fatalf("Publish after Close = %v, want ErrPublisherClosed", err)
	}
	if err := pub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPublisherToAnUnreachableBrokerFails(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	_, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: []string{addr}, Logger: watermill.NopLogger{}})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("NewPublisher(%s) = %v, want an error naming the broker", addr, err)
	}
}

// TestConcurrentBatchPublishesKeepPerKeyOrder has 16 goroutines publish
// batches of 25 at once through one Publisher, each goroutine owning two
// keys: every message is on the topic once, and each key's messages are
// in publish order.
func TestConcurrentBatchPublishesKeepPerKeyOrder(t *testing.T) {
	const writers, batches, batchSize = 16, 8, 25
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "batch")
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			n := 0
			for range batches {
				msgs := make([]*message.Message, batchSize)
				for i := range msgs {
					msgs[i] = message.NewMessage(watermill.NewULID(), []byte(strconv.Itoa(n/2)))
					msgs[i].Metadata.Set(bus.MetadataPartitionKey, fmt.Sprintf("w%d-k%d", w, n%2))
					n++
				}
				if err := pub.Publish(topic, msgs...); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()

	got := testenv.Consume(t, brokers, topic+"-group", topic, writers*batches*batchSize)
	next := map[string]int{}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.UUID] {
			t.Errorf("message %s delivered twice", m.UUID)
		}
		seen[m.UUID] = true
		key := m.Metadata.Get(bus.MetadataPartitionKey)
		n, _ := strconv.Atoi(string(m.Payload))
		if n != next[key] {
			t.Fatalf("key %s: got #%d, want #%d", key, n, next[key])
		}
		next[key]++
	}
	if len(next) != writers*2 {
		t.Fatalf("saw %d keys, want %d", len(next), writers*2)
	}
}

// TestPublisherWritesToTheAskedPartition: a message with
// bus.MetadataPartition lands on that partition whatever its key hashes
// to, keeping its key; a partition the topic does not have fails the
// publish with an error naming it, and publishes nothing.
func TestPublisherWritesToTheAskedPartition(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "partition")
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var msgs []*message.Message
	for i := range 12 {
		m := message.NewMessage(watermill.NewULID(), []byte("x"))
		m.Metadata.Set(bus.MetadataPartitionKey, fmt.Sprintf("key-%d", i))
		m.Metadata.Set(bus.MetadataPartition, "3")
		msgs = append(msgs, m)
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatal(err)
	}
	bad := message.NewMessage(watermill.NewULID(), []byte("x"))
	bad.Metadata.Set(bus.MetadataPartition, "9999")
	if err := pub.Publish(topic, bad); err == nil || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("publish to partition 9999: %v, want an error naming it", err)
	}
	notNumber := message.NewMessage(watermill.NewULID(), []byte("x"))
	notNumber.Metadata.Set(bus.MetadataPartition, "three")
	if err := pub.Publish(topic, notNumber); err == nil || !strings.Contains(err.Error(), "three") {
		t.Fatalf("publish to partition \"three\": %v, want an error naming it", err)
	}

	client, err := sarama.NewClient(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, p := range parts {
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if p != 3 && newest != 0 {
			t.Errorf("partition %d holds %d records, want none", p, newest)
		}
		total += newest
	}
	if total != 12 {
		t.Fatalf("the topic holds %d records, want the 12 on partition 3", total)
	}
	for _, m := range testenv.Consume(t, brokers, topic+"-group", topic, 12) {
		if !strings.HasPrefix(m.Metadata.Get(bus.MetadataPartitionKey), "key-") {
			t.Fatalf("a record lost its key: %v", m.Metadata)
		}
	}
}

// BenchmarkPublisherVsRawAsyncProducer compares kafka.Publisher with a bare
// sarama AsyncProducer (same acks=all, idempotence and keying) on the
// stack's broker, alternating the two in rounds within one run. Each b.N
// is 100 messages of 256 bytes over 64 keys; the raw side always puts all
// of a round's messages in flight at once and waits for every ack. Three
// shapes for our side:
//
//   - one-call: all of a round's messages in one Publish call, the same
//     shape as the raw side: the ratio is our overhead (target ≥ 0.5);
//   - batch=100: one goroutine publishes 100 messages per Publish call
//     (how the relay publishes a stream batch);
//   - concurrent=64: 64 goroutines publish one message per call (how
//     command senders publish).
//
// The last two wait for acks per call, so their ratios show what a
// synchronous caller pays in round trips, not overhead. Reported: msgs/s
// of each side and ours/raw. Nothing about time is asserted.
func BenchmarkPublisherVsRawAsyncProducer(b *testing.B) {
	brokers := testenv.KafkaBrokers(b)
	topic := testenv.UniqueName(b, "pubbench")
	payload := []byte(strings.Repeat("x", 256))
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	raw := newRawProducer(b, brokers)
	defer raw.Close()

	msgs := func(n int) []*message.Message {
		out := make([]*message.Message, n)
		for i := range out {
			out[i] = message.NewMessage(watermill.NewULID(), payload)
			out[i].Metadata.Set(bus.MetadataPartitionKey, "key-"+strconv.Itoa(i%64))
		}
		return out
	}
	shapes := []struct {
		name string
		run  func(b *testing.B, n int)
	}{
		{"one-call", func(b *testing.B, n int) {
			if err := pub.Publish(topic, msgs(n*100)...); err != nil {
				b.Fatal(err)
			}
		}},
		{"batch=100", func(b *testing.B, n int) {
			for range n {
				if err := pub.Publish(topic, msgs(100)...); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"concurrent=64", func(b *testing.B, n int) {
			all := msgs(n * 100)
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Go(func() {
					for i := g; i < len(all); i += 64 {
						if err := pub.Publish(topic, all[i]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		}},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			const rounds = 4
			var ours, base time.Duration
			per := max(1, (b.N+rounds-1)/rounds)
			for round := range rounds {
				n := min(per, b.N-round*per)
				if n <= 0 {
					break
				}
				start := time.Now()
				raw.send(b, topic, payload, n*100)
				base += time.Since(start)
				start = time.Now()
				shape.run(b, n)
				ours += time.Since(start)
			}
			total := float64(b.N * 100)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(total/ours.Seconds(), "msgs/s")
			b.ReportMetric(total/base.Seconds(), "raw_msgs/s")
			b.ReportMetric(base.Seconds()/ours.Seconds(), "ratio")
		})
	}
}

type rawProducer struct {
	sarama.AsyncProducer
	acked chan error
}

func newRawProducer(b *testing.B, brokers []string) *rawProducer {
	sc := sarama.NewConfig()
	sc.Version = kafka.KafkaVersion
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Idempotent = true
	sc.Net.MaxOpenRequests = 1
	sc.Producer.Return.Successes = true
	p, err := sarama.NewAsyncProducer(brokers, sc)
	if err != nil {
		b.Fatal(err)
	}
	r := &rawProducer{AsyncProducer: p, acked: make(chan error, 1024)}
	go func() {
		for range p.Successes() {
			r.acked <- nil
		}
	}()
	go func() {
		for e := range p.Errors() {
			r.acked <- e.Err
		}
	}()
	return r
}

func (r *rawProducer) send(b *testing.B, topic string, payload []byte, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		for i := range n {
			r.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("key-" + strconv.Itoa(i%64)), Value: sarama.ByteEncoder(payload)}
		}
	}()
	for range n {
		select {
		case err := <-r.acked:
			if err != nil {
				b.Fatal(err)
			}
		case <-ctx.Done():
			b.Fatal("raw producer: no ack within a minute")
		}
	}
}
