package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// The tests in this file run their own Kafka broker as a child process of
// the test binary (the project's broker from this tree), to put a group in
// a state the tests choose. init turns the binary into that broker when a
// test started it as one.
func init() { testservers.RunChildIfRequested() }

// TestSubscriberCloseDoesNotWaitForARebalance closes a subscriber while
// its member waits in JoinGroup for a member that hangs (joined, then
// silent, with a 30 s session). Close must not wait for the rebalance: it
// returns while the group still waits for the hung member, and its member
// leaves before that wait ends.
func TestSubscriberCloseDoesNotWaitForARebalance(t *testing.T) {
	broker := testservers.StartKafkaBrokerWithConfig(t, testservers.KafkaBrokerConfig{DataDir: t.TempDir()})
	brokers := []string{broker.Addr}
	topic := testenv.UniqueName(t, "close")
	group := topic + "-group"
	obs := testenv.NewGroupObserver(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()

	const hungTimeout = 30 * time.Second // the hung member's session and rebalance timeouts
	hung := testenv.NewRawMember(t, testenv.RawMemberConfig{Brokers: brokers, Group: group, Topic: topic,
		SessionTimeout: hungTimeout, RebalanceTimeout: hungTimeout})
	hung.JoinAndSync(ctx)

	const closeTimeout = 2 * time.Second
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: group, CloseTimeout: closeTimeout, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Subscribe(ctx, topic); err != nil {
		t.Fatal(err)
	}
	var ids []string
	integration.Await(t, "the subscriber to join the group", func() error {
		snap, err := obs.Describe(group)
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, m := range snap.Members {
			ids = append(ids, m.ID)
		}
		if len(ids) != 2 {
			return fmt.Errorf("members %v", ids)
		}
		return nil
	})
	ours := ids[0]
	if ours == hung.ID {
		ours = ids[1]
	}
	time.Sleep(time.Second) // it waits in the join barrier

	start := time.Now()
	err = sub.Close()
	t.Logf("Close returned after %s (%v)", time.Since(start).Truncate(time.Millisecond), err)
	// Close did not wait for the rebalance: the hung member holds the
	// group in it until its rebalance timeout, and it still does.
	inRebalance := func(state string) bool { return state == "PreparingRebalance" || state == "CompletingRebalance" }
	snap, err := obs.Describe(group)
	if err != nil {
		t.Fatal(err)
	}
	if !inRebalance(snap.State) {
		t.Fatalf("Close returned only when the group had left the rebalance (%s, %v)", snap.State, snap)
	}
	// The member leaves on its own, while the group still waits for the
	// hung one: not dropped when the rebalance times out.
	integration.Await(t, "the closed subscriber's member "+ours+" to leave the group", func() error {
		snap, err := obs.Describe(group)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(snap.Members, func(m testenv.GroupMember) bool { return m.ID == ours }) {
			return nil
		}
		if !inRebalance(snap.State) {
			t.Fatalf("the closed subscriber's member %s stayed until the rebalance ended: %v", ours, snap)
		}
		return fmt.Errorf("still a member: %v", snap)
	})
}

// TestSubscriberConfigKeepsRebalanceBelowSession: the rebalance timeout
// must stay below the session timeout and the heartbeat interval at most
// a third of it (see kafka.NewSubscriber); the defaults satisfy both.
func TestSubscriberConfigKeepsRebalanceBelowSession(t *testing.T) {
	base := kafka.SubscriberConfig{Brokers: []string{"127.0.0.1:9092"}, ConsumerGroup: "g"}
	if _, err := kafka.NewSubscriber(base); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	for name, mod := range map[string]func(*kafka.SubscriberConfig){
		"rebalance = session":   func(c *kafka.SubscriberConfig) { c.SessionTimeout, c.RebalanceTimeout = 10*time.Second, 10*time.Second },
		"heartbeat > session/3": func(c *kafka.SubscriberConfig) { c.SessionTimeout, c.HeartbeatInterval = 9*time.Second, 4*time.Second },
		"negative close":        func(c *kafka.SubscriberConfig) { c.CloseTimeout = -time.Second },
	} {
		cfg := base
		mod(&cfg)
		if _, err := kafka.NewSubscriber(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSubscriberConfigOffsetsAndPauses: InitialOffset defaults to the
// oldest offset, takes the newest, and rejects anything else; a negative
// ReconnectRetrySleep is rejected.
func TestSubscriberConfigOffsetsAndPauses(t *testing.T) {
	base := kafka.SubscriberConfig{Brokers: []string{"127.0.0.1:9092"}, ConsumerGroup: "g"}
	for _, tc := range []struct {
		set  int64
		want int64
	}{{0, sarama.OffsetOldest}, {sarama.OffsetOldest, sarama.OffsetOldest}, {sarama.OffsetNewest, sarama.OffsetNewest}} {
		cfg := base
		cfg.InitialOffset = tc.set
		sc, err := cfg.SaramaConfig()
		if err != nil {
			t.Fatalf("InitialOffset %d rejected: %v", tc.set, err)
		}
		if sc.Consumer.Offsets.Initial != tc.want {
			t.Errorf("InitialOffset %d: sarama starts at %d, want %d", tc.set, sc.Consumer.Offsets.Initial, tc.want)
		}
	}
	for name, mod := range map[string]func(*kafka.SubscriberConfig){
		"offset 5":           func(c *kafka.SubscriberConfig) { c.InitialOffset = 5 },
		"offset -3":          func(c *kafka.SubscriberConfig) { c.InitialOffset = -3 },
		"negative reconnect": func(c *kafka.SubscriberConfig) { c.ReconnectRetrySleep = -time.Millisecond },
	} {
		cfg := base
		mod(&cfg)
		if _, err := kafka.NewSubscriber(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
