package keyed_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestCommitNeverPassesAHeldMessage consumes one partition of 112
// messages and holds the message at offset 10 unacked while acking every
// other: the group's committed offset reaches 10 and never passes it, and
// the next message of the held key is not handed out; once the held
// message is acked, the commit covers all 112.
func TestCommitNeverPassesAHeldMessage(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := createTopic(t, brokers, "keyed-commit", 1)
	group := topic + "-group"
	var ids []string
	for i := range 10 {
		ids = append(ids, msgID(fmt.Sprintf("a%d", i), 0)) // offsets 0–9
	}
	ids = append(ids, msgID("held", 0)) // offset 10
	for i := range 50 {
		ids = append(ids, msgID(fmt.Sprintf("b%d", i%10), i/10)) // 11–60
	}
	ids = append(ids, msgID("held", 1)) // 61
	for i := range 50 {
		ids = append(ids, msgID(fmt.Sprintf("c%d", i%10), i/10)) // 62–111
	}
	publish(t, brokers, topic, ids)
	const heldOffset, total = 10, 112

	// Watch the committed offset from before the first message on.
	var (
		mu        sync.Mutex
		committed int64 = -1
		highest   int64 = -1
	)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			off, ok := testenv.CommittedOffsets(t, brokers, group, topic)[0]
			mu.Lock()
			if ok {
				committed, highest = off, max(highest, off)
			}
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() { stopWatch(); <-watched }()
	current := func() (int64, int64) {
		mu.Lock()
		defer mu.Unlock()
		return committed, highest
	}

	sub := newSubscriber(t, keyed.Config{Brokers: brokers, ConsumerGroup: group, CommitInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	receive := func() *message.Message {
		t.Helper()
		select {
		case m := <-msgs:
			return m
		case <-time.After(integration.HangAfter()):
			t.Fatalf("no message for %v (%s)", integration.HangAfter(), integration.EnvHangAfter)
			return nil
		}
	}
	var held *message.Message
	for range total - 1 {
		m := receive()
		switch m.UUID {
		case msgID("held", 0):
			held = m
			continue
		case msgID("held", 1):
			t.Fatalf("held:1 handed out while held:0 is unacked")
		}
		m.Ack()
	}
	if held == nil {
		t.Fatal("held:0 never arrived")
	}
	integration.Await(t, "the commit of the acked prefix", func() error {
		if c, _ := current(); c != heldOffset {
			return fmt.Errorf("committed offset %d with every message below %d acked, want %d", c, heldOffset, heldOffset)
		}
		return nil
	})
	time.Sleep(time.Second) // commits keep coming every 50 ms; none may pass the held message
	_, highestHeld := current()
	if highestHeld > heldOffset {
		t.Fatalf("committed offset reached %d while offset %d was unacked", highestHeld, heldOffset)
	}
	select {
	case m := <-msgs:
		t.Fatalf("%s handed out while held:0 is unacked", m.UUID)
	default:
	}

	held.Ack()
	if m := receive(); m.UUID != msgID("held", 1) {
		t.Fatalf("got %s after acking held:0, want held:1", m.UUID)
	} else {
		m.Ack()
	}
	integration.Await(t, "the commit of every message", func() error {
		if c, _ := current(); c != total {
			return fmt.Errorf("committed offset %d after every message was acked, want %d", c, total)
		}
		return nil
	})
	t.Logf("committed offset reached %d and stayed there while it was held (highest seen: %d), then %d", heldOffset, highestHeld, total)
}

// TestNackRedeliversBeforeLaterMessagesOfItsKeyWhileOtherKeysFlow nacks
// the first message of key x twice: it is handed out again each time,
// x:1 only after it is acked, and the messages of other keys behind it
// on the partition arrive meanwhile.
func TestNackRedeliversBeforeLaterMessagesOfItsKeyWhileOtherKeysFlow(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := createTopic(t, brokers, "keyed-nack", 1)
	ids := []string{msgID("x", 0)}
	for i := range 5 {
		ids = append(ids, msgID("y", i))
	}
	ids = append(ids, msgID("x", 1))
	for i := range 5 {
		ids = append(ids, msgID("z", i))
	}
	publish(t, brokers, topic, ids)

	sub := newSubscriber(t, keyed.Config{Brokers: brokers, ConsumerGroup: topic + "-group", NackResendSleep: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	xDeliveries, others := 0, 0
	for len(order) < len(ids)+2 {
		var m *message.Message
		select {
		case m = <-msgs:
		case <-time.After(integration.HangAfter()):
			t.Fatalf("no message for %v (%s) after %v", integration.HangAfter(), integration.EnvHangAfter, order)
		}
		order = append(order, m.UUID)
		switch m.UUID {
		case msgID("x", 0):
			xDeliveries++
			if xDeliveries < 3 {
				m.Nack()
				continue
			}
			if others != 10 {
				t.Errorf("x:0's third delivery came after %d of the 10 messages of other keys, want all", others)
			}
		case msgID("x", 1):
			if xDeliveries != 3 {
				t.Errorf("x:1 handed out after %d deliveries of x:0, want 3 (the last one acked)", xDeliveries)
			}
		default:
			others++
		}
		m.Ack()
	}
	t.Logf("delivery order: %v", order)
	testenv.WaitCommitted(t, brokers, topic+"-group", topic, int64(len(ids)))
}

// TestCloseCommitsTheAckedPrefixAndAbandonsTheRest closes a subscriber
// right after acking every message of one partition but the one at
// offset 20: Close waits RevokeTimeout for it, cancels its context, and
// when Close returns the group has committed exactly offset 20.
func TestCloseCommitsTheAckedPrefixAndAbandonsTheRest(t *testing.T) {
	const total, heldAt = 50, 20
	brokers := testenv.KafkaBrokers(t)
	topic := createTopic(t, brokers, "keyed-close", 1)
	group := topic + "-group"
	var ids []string
	for i := range total {
		ids = append(ids, msgID(fmt.Sprintf("k%d", i%7), i/7))
	}
	publish(t, brokers, topic, ids)

	const revoke = 500 * time.Millisecond
	sub := newSubscriber(t, keyed.Config{Brokers: brokers, ConsumerGroup: group, RevokeTimeout: revoke, CommitInterval: time.Hour})
	msgs, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var held *message.Message
	heldKey, _ := parseID(t, ids[heldAt])
	blocked := 0 // later messages of the held key, which stay behind it
	for _, id := range ids[heldAt+1:] {
		if k, _ := parseID(t, id); k == heldKey {
			blocked++
		}
	}
	for received := 0; received < total-blocked; received++ {
		var m *message.Message
		select {
		case m = <-msgs:
		case <-time.After(integration.HangAfter()):
			t.Fatalf("received %d messages, then none for %v (%s)", received, integration.HangAfter(), integration.EnvHangAfter)
		}
		if m.UUID == ids[heldAt] {
			held = m
			continue
		}
		if k, _ := parseID(t, m.UUID); k == heldKey && held != nil {
			t.Fatalf("%s handed out while %s is unacked", m.UUID, held.UUID)
		}
		m.Ack()
	}
	if held == nil {
		t.Fatalf("%s never arrived", ids[heldAt])
	}
	start := time.Now()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < revoke {
		t.Errorf("Close returned after %s, before RevokeTimeout %s while a message was in flight", took, revoke)
	}
	if held.Context().Err() == nil {
		t.Error("the abandoned message's context is not cancelled")
	}
	got := testenv.CommittedOffsets(t, brokers, group, topic)[0]
	t.Logf("Close took %s; committed offset %d (held %s at %d, key %s)", took.Round(time.Millisecond), got, ids[heldAt], heldAt, heldKey)
	if got != heldAt {
		t.Fatalf("committed offset %d after Close, want %d: every message below it acked, it not", got, heldAt)
	}
}
