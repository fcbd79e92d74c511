package keyed_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestSecondMemberTakesOverPartitionsWithoutBreakingKeyOrder consumes
// 8,000 messages over 40 keys on 8 partitions with one subscriber and
// starts a second in the same group while the first is busy: both end up
// with partitions and process messages, none is lost, and no message of
// a key is processed before the earlier ones of its key, nor beside one,
// by either member.
func TestSecondMemberTakesOverPartitionsWithoutBreakingKeyOrder(t *testing.T) {
	const keys, perKey, partitions = 40, 200, 8
	brokers := testenv.KafkaBrokers(t)
	topic := createTopic(t, brokers, "keyed-rebalance", partitions)
	group := topic + "-group"
	publish(t, brokers, topic, roundRobin(keys, perKey))

	ledger := newKeyLedger(t)
	var processedBy [2]atomic.Int64
	var aAfterB atomic.Int64 // messages the first member processed after the second began
	handler := func(member int) message.NoPublishHandlerFunc {
		name := [2]string{"first", "second"}[member]
		return func(msg *message.Message) error {
			ledger.begin(name, msg.UUID)
			time.Sleep(time.Duration(15+rand.IntN(21)) * time.Millisecond)
			ledger.end(msg.UUID)
			processedBy[member].Add(1)
			if member == 0 && processedBy[1].Load() > 0 {
				aAfterB.Add(1)
			}
			return nil
		}
	}
	cfg := keyed.Config{Brokers: brokers, ConsumerGroup: group}
	runRouter(t, newSubscriber(t, cfg), topic, handler(0))
	integration.AwaitProgress(t, "messages processed by the first member", processedBy[0].Load, 400)
	joinedAt := processedBy[0].Load()
	runRouter(t, newSubscriber(t, cfg), topic, handler(1))

	obs := testenv.NewGroupObserver(t, brokers)
	var snap testenv.GroupSnapshot
	integration.Await(t, "both members with partitions", func() error {
		var err error
		if snap, err = obs.Describe(group); err != nil {
			t.Fatal(err)
		}
		if snap.State != "Stable" || len(snap.Members) != 2 {
			return fmt.Errorf("group %s", snap)
		}
		for _, m := range snap.Members {
			if len(m.Partitions[topic]) == 0 {
				return fmt.Errorf("group %s", snap)
			}
		}
		return nil
	})
	t.Logf("second member joined after %d messages; group %s", joinedAt, snap)

	integration.AwaitProgress(t, "messages processed", func() int64 { unique, _, _ := ledger.counts(); return int64(unique) }, keys*perKey)
	unique, dups, violations := ledger.counts()
	t.Logf("%d messages, %d duplicates, %d order violations; first member %d (%d after the second began), second %d",
		unique, dups, violations, processedBy[0].Load(), aAfterB.Load(), processedBy[1].Load())
	if processedBy[1].Load() == 0 || aAfterB.Load() == 0 {
		t.Errorf("both members must process messages after the rebalance: first %d, second %d", aAfterB.Load(), processedBy[1].Load())
	}
	if bound := 256 * partitions; dups > bound {
		t.Errorf("%d duplicates after one rebalance, more than MaxInFlight × partitions = %d", dups, bound)
	}
}
