package keyed_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestRouterProcessesEachKeyInOrderWithManyMessagesOfAPartitionInFlight
// publishes 10,000 messages over 100 keys on 8 partitions and consumes
// them through a Watermill Router whose handler sleeps 0–5 ms: every
// message is processed once, each after every earlier message of its key
// and never beside another message of its key, while several messages of
// one partition are processed at once.
func TestRouterProcessesEachKeyInOrderWithManyMessagesOfAPartitionInFlight(t *testing.T) {
	const keys, perKey, partitions = 100, 100, 8
	brokers := testenv.KafkaBrokers(t)
	topic := createTopic(t, brokers, "keyed-order", partitions)
	publish(t, brokers, topic, roundRobin(keys, perKey))

	sub := newSubscriber(t, keyed.Config{Brokers: brokers, ConsumerGroup: topic + "-group"})
	ledger := newKeyLedger(t)
	gauge := newInFlightGauge()
	start := time.Now()
	runRouter(t, sub, topic, func(msg *message.Message) error {
		p, ok := keyed.MessagePartitionFromCtx(msg.Context())
		if !ok {
			return fmt.Errorf("message %s has no partition in its context", msg.UUID)
		}
		gauge.enter(p)
		defer gauge.leave(p)
		ledger.begin("router", msg.UUID)
		time.Sleep(time.Duration(rand.IntN(5001)) * time.Microsecond)
		ledger.end(msg.UUID)
		return nil
	})
	integration.AwaitProgress(t, "messages processed", func() int64 { unique, _, _ := ledger.counts(); return int64(unique) }, keys*perKey)
	unique, dups, violations := ledger.counts()
	peaks := gauge.peaks()
	t.Logf("%d messages (%d duplicates, %d order violations) in %s; peak in flight per partition %v",
		unique, dups, violations, time.Since(start).Round(time.Millisecond), peaks)
	if dups != 0 {
		t.Errorf("%d messages processed twice without any crash or rebalance", dups)
	}
	if len(peaks) != partitions {
		t.Errorf("messages came from %d partitions, want %d", len(peaks), partitions)
	}
	for p, n := range peaks {
		if n < 2 {
			t.Errorf("partition %d never had more than %d message in flight", p, n)
		}
	}
}
