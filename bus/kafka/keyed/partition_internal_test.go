package keyed

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// fakeSession records the marked offsets of one partition.
type fakeSession struct {
	ctx    context.Context
	mu     sync.Mutex
	marked []int64
}

func (s *fakeSession) Claims() map[string][]int32 { return nil }
func (s *fakeSession) MemberID() string           { return "m" }
func (s *fakeSession) GenerationID() int32        { return 1 }
func (s *fakeSession) MarkOffset(_ string, _ int32, offset int64, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, offset)
}
func (s *fakeSession) Commit()                                     {}
func (s *fakeSession) ResetOffset(string, int32, int64, string)    {}
func (s *fakeSession) MarkMessage(*sarama.ConsumerMessage, string) {}
func (s *fakeSession) Context() context.Context                    { return s.ctx }
func (s *fakeSession) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.marked) == 0 {
		return -1
	}
	return s.marked[len(s.marked)-1]
}

// fakeClaim serves records from a channel the test feeds.
type fakeClaim struct{ records chan *sarama.ConsumerMessage }

func (c *fakeClaim) Topic() string                            { return "t" }
func (c *fakeClaim) Partition() int32                         { return 0 }
func (c *fakeClaim) InitialOffset() int64                     { return 0 }
func (c *fakeClaim) HighWaterMarkOffset() int64               { return 0 }
func (c *fakeClaim) Messages() <-chan *sarama.ConsumerMessage { return c.records }

func record(offset int64, key string) *sarama.ConsumerMessage {
	return &sarama.ConsumerMessage{Topic: "t", Partition: 0, Offset: offset, Key: []byte(key),
		Headers: []*sarama.RecordHeader{{Key: []byte(wmkafka.UUIDHeaderKey), Value: []byte(fmt.Sprintf("%s@%d", key, offset))}}}
}

// partitionUnderTest runs a partition on a fake claim.
type partitionUnderTest struct {
	p       *partition
	sess    *fakeSession
	claim   *fakeClaim
	out     chan *message.Message
	stop    chan struct{}
	done    chan error
	commits chan struct{}

	stopOnce, waitOnce sync.Once
	err                error
}

// revoke ends the partition as a closing subscription does.
func (u *partitionUnderTest) revoke() { u.stopOnce.Do(func() { close(u.stop) }) }

// wait returns what run returned.
func (u *partitionUnderTest) wait() error {
	u.waitOnce.Do(func() { u.err = <-u.done })
	return u.err
}

func runPartition(t *testing.T, cfg Config) *partitionUnderTest {
	t.Helper()
	cfg.Brokers, cfg.ConsumerGroup, cfg.Logger = []string{"127.0.0.1:1"}, "g", watermill.NopLogger{}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	u := &partitionUnderTest{sess: &fakeSession{ctx: context.Background()}, claim: &fakeClaim{records: make(chan *sarama.ConsumerMessage, 100)},
		out: make(chan *message.Message), stop: make(chan struct{}), done: make(chan error, 1), commits: make(chan struct{}, 100)}
	u.p = newPartition(context.Background(), &cfg, u.sess, "t", 0, u.out, func() {
		select {
		case u.commits <- struct{}{}:
		default:
		}
	})
	go func() { u.done <- u.p.run(u.claim, u.stop) }()
	t.Cleanup(func() {
		u.revoke()
		_ = u.wait()
	})
	return u
}

func (u *partitionUnderTest) receive(t *testing.T) *message.Message {
	t.Helper()
	select {
	case m := <-u.out:
		return m
	case <-time.After(integration.HangAfter()):
		t.Fatalf("no message handed out within %v (%s)", integration.HangAfter(), integration.EnvHangAfter)
		return nil
	}
}

func (u *partitionUnderTest) none(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case m := <-u.out:
		t.Fatalf("%s handed out, want nothing", m.UUID)
	case <-time.After(within):
	}
}

// TestRevokeAbandonsUnackedMessagesAndMarksOnlyTheAckedPrefix: of three
// messages in flight, the first and third are acked; the revoke waits
// RevokeTimeout for the second, then cancels its context and leaves it
// unmarked, and a fourth message behind it on its key is never handed
// out.
func TestRevokeAbandonsUnackedMessagesAndMarksOnlyTheAckedPrefix(t *testing.T) {
	u := runPartition(t, Config{RevokeTimeout: 300 * time.Millisecond})
	for i, key := range []string{"a", "b", "c", "b"} {
		u.claim.records <- record(int64(i), key)
	}
	got := map[string]*message.Message{}
	for range 3 {
		m := u.receive(t)
		got[m.UUID] = m
	}
	u.none(t, 100*time.Millisecond) // b@3 waits for b@1
	got["a@0"].Ack()
	got["c@2"].Ack()
	integration.Await(t, "the mark of a@0", func() error {
		if last := u.sess.last(); last != 1 {
			return fmt.Errorf("marked up to %d, want 1 (a@0 acked, b@1 not)", last)
		}
		return nil
	})

	start := time.Now()
	u.revoke()
	if err := u.wait(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// At least the timeout, and over before the group's rebalance timeout
	// (8 s by default), which the revoke exists to stay under.
	if took < 300*time.Millisecond || took >= 8*time.Second {
		t.Errorf("revoke took %s, want RevokeTimeout (300ms) and well before the rebalance timeout", took)
	}
	if err := got["b@1"].Context().Err(); err == nil {
		t.Error("the abandoned message's context was not cancelled")
	}
	if m := u.sess.last(); m != 1 {
		t.Errorf("last mark %d after the revoke, want 1: never past the unacked b@1", m)
	}
}

// TestRevokeWaitsForMessagesInFlightAndMarksThem: a message acked while
// its partition is being revoked is marked, and the revoke returns as
// soon as nothing is in flight.
func TestRevokeWaitsForMessagesInFlightAndMarksThem(t *testing.T) {
	// The longest timeout the rebalance timeout allows: a revoke that
	// waited for it, not for the last ack, is the bug this test looks for.
	const revokeTimeout = 7 * time.Second
	u := runPartition(t, Config{RevokeTimeout: revokeTimeout})
	u.claim.records <- record(0, "a")
	u.claim.records <- record(1, "b")
	a, b := u.receive(t), u.receive(t)
	a.Ack()
	close(u.claim.records) // revoked
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	b.Ack()
	if err := u.wait(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= revokeTimeout {
		t.Errorf("revoke returned %s after the last ack: it waited for its timeout (%v)", took, revokeTimeout)
	}
	if m := u.sess.last(); m != 2 {
		t.Errorf("last mark %d, want 2", m)
	}
}

// TestWindowStopsReadingUntilACommitCoversAckedRecords: with
// MaxInFlight 4, four records of distinct keys are handed out and no
// fifth is read, acked or not, until a commit covers them.
func TestWindowStopsReadingUntilACommitCoversAckedRecords(t *testing.T) {
	u := runPartition(t, Config{MaxInFlight: 4})
	for i := range 8 {
		u.claim.records <- record(int64(i), fmt.Sprintf("k%d", i))
	}
	var first []*message.Message
	for range 4 {
		first = append(first, u.receive(t))
	}
	u.none(t, 200*time.Millisecond)
	for _, m := range first {
		m.Ack()
	}
	select {
	case <-u.commits:
	case <-time.After(integration.HangAfter()):
		t.Fatalf("a full window of acked records did not ask for a commit within %v (%s)", integration.HangAfter(), integration.EnvHangAfter)
	}
	u.none(t, 200*time.Millisecond) // acked but not committed: still in the window
	mark, dirty := u.p.commitMark()
	if mark != 4 || !dirty {
		t.Fatalf("commit mark %d (dirty %v), want 4", mark, dirty)
	}
	u.p.committedUpTo(mark)
	for range 4 {
		u.receive(t).Ack()
	}
}

// TestNackedMessageIsHandedOutAgainBeforeTheNextOfItsKey: after a nack
// the same message comes again, the key's next one only after its ack.
func TestNackedMessageIsHandedOutAgainBeforeTheNextOfItsKey(t *testing.T) {
	u := runPartition(t, Config{NackResendSleep: 50 * time.Millisecond})
	u.claim.records <- record(0, "a")
	u.claim.records <- record(1, "a")
	m := u.receive(t)
	m.Nack()
	again := u.receive(t)
	if again.UUID != m.UUID {
		t.Fatalf("after the nack of %s got %s", m.UUID, again.UUID)
	}
	if again.Context().Value(offsetKey) != int64(0) {
		t.Errorf("the redelivered message lost its context")
	}
	u.none(t, 100*time.Millisecond)
	again.Ack()
	next := u.receive(t)
	if next.UUID != "a@1" {
		t.Fatalf("got %s, want a@1", next.UUID)
	}
	next.Ack()
}
