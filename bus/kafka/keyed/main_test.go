package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
)

func TestMain(m *testing.M) {
	testservers.RunChildIfRequested() // a Kafka broker child
	runConsumerChildIfRequested()
	os.Exit(m.Run())
}

// createTopic creates a topic with partitions partitions and returns its
// name.
func createTopic(t *testing.T, brokers []string, prefix string, partitions int32) string {
	t.Helper()
	topic := testenv.UniqueName(t, prefix)
	cfg := sarama.NewConfig()
	cfg.Version = kafka.KafkaVersion
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	return topic
}

// msgID names message seq of key: "key:seq".
func msgID(key string, seq int) string { return key + ":" + strconv.Itoa(seq) }

// parseID splits a msgID.
func parseID(t testing.TB, id string) (key string, seq int) {
	key, s, ok := strings.Cut(id, ":")
	n, err := strconv.Atoi(s)
	if !ok || err != nil {
		t.Fatalf("message id %q is not key:seq", id)
	}
	return key, n
}

// publish publishes the messages named by ids (msgID), in order, keyed by
// their key, and returns after the broker acked them all.
func publish(t *testing.T, brokers []string, topic string, ids []string) {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for start := 0; start < len(ids); start += 1000 {
		var msgs []*message.Message
		for _, id := range ids[start:min(start+1000, len(ids))] {
			key, _ := parseID(t, id)
			m := message.NewMessage(id, []byte(id))
			m.Metadata.Set(bus.MetadataPartitionKey, key)
			msgs = append(msgs, m)
		}
		if err := pub.Publish(topic, msgs...); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

// roundRobin returns the ids of perKey messages for each of keys keys,
// interleaved: seq 0 of every key, then seq 1, ...
func roundRobin(keys, perKey int) []string {
	var ids []string
	for seq := range perKey {
		for k := range keys {
			ids = append(ids, msgID(fmt.Sprintf("key-%03d", k), seq))
		}
	}
	return ids
}

// newSubscriber returns a keyed subscriber closed when t ends.
func newSubscriber(t *testing.T, cfg keyed.Config) *keyed.Subscriber {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = watermill.NopLogger{}
	}
	sub, err := keyed.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// keyLedger checks per-key order across any number of consumers: a
// message may be processed only after every earlier message of its key
// was processed at least once, and never while another message of its
// key is being processed. It counts duplicates.
type keyLedger struct {
	t          testing.TB
	mu         sync.Mutex
	next       map[string]int  // the lowest seq of the key not processed yet
	busy       map[string]bool // a message of the key is being processed
	seen       map[string]bool // message ids processed
	duplicates int
	violations int
}

func newKeyLedger(t testing.TB) *keyLedger {
	return &keyLedger{t: t, next: map[string]int{}, busy: map[string]bool{}, seen: map[string]bool{}}
}

// begin records that processing of id starts; it reports errors on t.
func (l *keyLedger) begin(who, id string) {
	key, seq := parseID(l.t, id)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[key] {
		l.violate("%s: %s began while another message of key %s was being processed", who, id, key)
	}
	l.busy[key] = true
	if seq > l.next[key] {
		l.violate("%s: %s began before %s was processed", who, id, msgID(key, l.next[key]))
	}
}

// end records that processing of id finished and returns how many
// distinct messages have been processed.
func (l *keyLedger) end(id string) int {
	key, seq := parseID(l.t, id)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy[key] = false
	if l.seen[id] {
		l.duplicates++
	} else {
		l.seen[id] = true
	}
	if seq == l.next[key] {
		l.next[key] = seq + 1
	}
	return len(l.seen)
}

func (l *keyLedger) violate(format string, args ...any) {
	l.violations++
	if l.violations <= 10 {
		l.t.Errorf(format, args...)
	}
}

func (l *keyLedger) counts() (unique, duplicates, violations int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen), l.duplicates, l.violations
}

// inFlightGauge measures how many handler calls run at once per
// partition.
type inFlightGauge struct {
	mu   sync.Mutex
	now  map[int32]int
	peak map[int32]int
}

func newInFlightGauge() *inFlightGauge {
	return &inFlightGauge{now: map[int32]int{}, peak: map[int32]int{}}
}

func (g *inFlightGauge) enter(p int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now[p]++
	g.peak[p] = max(g.peak[p], g.now[p])
}

func (g *inFlightGauge) leave(p int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now[p]--
}

func (g *inFlightGauge) peaks() map[int32]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int32]int{}
	for p, n := range g.peak {
		out[p] = n
	}
	return out
}

// runRouter runs a Watermill Router with one handler on sub until t ends.
func runRouter(t *testing.T, sub message.Subscriber, topic string, h message.NoPublishHandlerFunc) *message.Router {
	t.Helper()
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	r.AddConsumerHandler("keyed-test", topic, sub, h)
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case <-r.Running():
	case err := <-done:
		t.Fatalf("router stopped: %v", err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("router: %v", err)
		}
	})
	return r
}
