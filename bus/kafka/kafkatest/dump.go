package kafkatest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TopicsDump returns every record of every topic whose name begins with
// prefix, as text (topic, partition, offset, headers, key and value),
// read from the oldest offset to the end each partition has now: what
// a byte search of the broker's data for those topics would find.
func TopicsDump(tb testing.TB, brokers []string, prefix string) string {
	tb.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = kafka.KafkaVersion
	cfg.Consumer.Return.Errors = true
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		tb.Fatalf("kafka client: %v", err)
	}
	defer client.Close()
	if err := client.RefreshMetadata(); err != nil {
		tb.Fatalf("kafka metadata: %v", err)
	}
	topics, err := client.Topics()
	if err != nil {
		tb.Fatalf("kafka topics: %v", err)
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		tb.Fatalf("kafka consumer: %v", err)
	}
	defer consumer.Close()
	var b strings.Builder
	for _, topic := range topics {
		if !strings.HasPrefix(topic, prefix) {
			continue
		}
		partitions, err := client.Partitions(topic)
		if err != nil {
			tb.Fatalf("partitions of %s: %v", topic, err)
		}
		for _, p := range partitions {
			end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
			if err != nil {
				tb.Fatalf("end of %s/%d: %v", topic, p, err)
			}
			start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
			if err != nil {
				tb.Fatalf("start of %s/%d: %v", topic, p, err)
			}
			if start >= end {
				continue
			}
			pc, err := consumer.ConsumePartition(topic, p, start)
			if err != nil {
				tb.Fatalf("read %s/%d: %v", topic, p, err)
			}
			hang := time.After(integration.HangAfter())
			for next := start; next < end; {
				select {
				case m := <-pc.Messages():
					fmt.Fprintf(&b, "%s/%d@%d", topic, p, m.Offset)
					for _, h := range m.Headers {
						fmt.Fprintf(&b, " %s=%s", h.Key, h.Value)
					}
					fmt.Fprintf(&b, " key=%s value=%s\n", m.Key, m.Value)
					next = m.Offset + 1
				case err := <-pc.Errors():
					tb.Fatalf("read %s/%d: %v", topic, p, err)
				case <-hang:
					tb.Fatalf("read %s/%d: stuck before offset %d of %d for %v", topic, p, next, end, integration.HangAfter())
				}
			}
			pc.Close()
		}
	}
	return b.String()
}
