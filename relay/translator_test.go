package relay_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// routingTranslator publishes a record whose sk is "ok#<n>" on
// "<prefix>custom.<n>" keyed by its sk, skips "skip#…" and refuses
// anything else.
type routingTranslator struct{ prefix string }

func (r routingTranslator) Translate(rec st.Record) (relay.Outgoing, bool, error) {
	sk := rec.Dynamodb.Keys["sk"].(*st.AttributeValueMemberS).Value
	switch kind, n, _ := strings.Cut(sk, "#"); kind {
	case "ok":
		msg := message.NewMessage(aws.ToString(rec.EventID), []byte(sk))
		msg.Metadata.Set(bus.MetadataPartitionKey, sk)
		return relay.Outgoing{Topic: r.prefix + "custom." + n, Message: msg}, true, nil
	case "skip":
		return relay.Outgoing{}, false, nil
	}
	return relay.Outgoing{}, false, fmt.Errorf("record %s: unknown sk %q", aws.ToString(rec.Dynamodb.SequenceNumber), sk)
}

// topicPublisher keeps what was published per topic.
type topicPublisher struct {
	mu      sync.Mutex
	byTopic map[string][]*message.Message
}

func (p *topicPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTopic == nil {
		p.byTopic = map[string][]*message.Message{}
	}
	p.byTopic[topic] = append(p.byTopic[topic], msgs...)
	return nil
}

func (p *topicPublisher) Close() error { return nil }

func (p *topicPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, msgs := range p.byTopic {
		n += len(msgs)
	}
	return n
}

// TestRelayPublishesWhatItsTranslatorReturns runs a relay with its own
// RecordTranslator and StreamName over a stream served from memory (the
// lease table is real): published records go where the translator says,
// skipped ones nowhere, a refused one to poison.relay.<StreamName>, and
// the metrics count them under stream=<StreamName>.
func TestRelayPublishesWhatItsTranslatorReturns(t *testing.T) {
	e := newEnv(t)
	var records []st.Record
	for i, sk := range []string{"ok#a", "skip#1", "ok#b", "bad#1", "ok#a", "skip#2"} {
		seq := fmt.Sprintf("%021d", i+1)
		records = append(records, st.Record{EventName: st.OperationTypeInsert, EventID: aws.String("rec-" + seq), Dynamodb: &st.StreamRecord{
			SequenceNumber: aws.String(seq), Keys: map[string]st.AttributeValue{"sk": &st.AttributeValueMemberS{Value: sk}},
		}})
	}
	fake := &fakeStreams{arn: "arn:fake:stream/custom-" + e.ep.LeasesTable, shards: []*fakeShard{{id: "shard-1", records: records}}}
	pub := &topicPublisher{}
	reg := prometheus.NewRegistry()
	stop := runRelay(t, relay.Config{
		Streams: fake, DynamoDB: e.db, StreamARN: fake.arn, LeaseTable: e.ep.LeasesTable, Publisher: pub, Topics: e.topics,
		Translator: routingTranslator{prefix: e.topics.Prefix}, StreamName: "custom", Registerer: reg,
		WorkerID: "w1", LeaseDuration: time.Second, DiscoveryInterval: 50 * time.Millisecond,
	})
	integration.AwaitProgress(t, "messages published", func() int64 { return int64(pub.count()) }, 4)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	poison := e.topics.Poison("relay.custom")
	want := map[string][]string{e.topics.Prefix + "custom.a": {"ok#a", "ok#a"}, e.topics.Prefix + "custom.b": {"ok#b"}}
	for topic, sks := range want {
		var got []string
		for _, m := range pub.byTopic[topic] {
			got = append(got, string(m.Payload))
		}
		if fmt.Sprint(got) != fmt.Sprint(sks) {
			t.Errorf("%s: %v, want %v", topic, got, sks)
		}
	}
	if p := pub.byTopic[poison]; len(p) != 1 || !strings.Contains(p[0].Metadata.Get(relay.MetadataPoisonReason), `unknown sk "bad#1"`) {
		t.Errorf("poison topic %s holds %d messages (%v), want the refused record", poison, len(p), pub.byTopic)
	}
	if len(pub.byTopic) != 3 {
		t.Errorf("published on %d topics, want 3: %v", len(pub.byTopic), pub.byTopic)
	}
	for outcome, want := range map[string]float64{"published": 3, "skipped": 2, "poison": 1} {
		if got := metricValue(t, reg, "eventpipe_relay_records_total", map[string]string{"stream": "custom", "outcome": outcome}); got != want {
			t.Errorf("records_total{stream=custom,outcome=%s} = %v, want %v", outcome, got, want)
		}
	}
}

// TestRelaysOfDifferentStreamsShareOneRegistry builds relays of two
// streams on one registry: every series carries its stream label, and a
// second relay of the same stream on that registry is refused with an
// error rather than a panic. A bad StreamName is refused by name.
func TestRelaysOfDifferentStreamsShareOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := func(stream string) relay.Config {
		return relay.Config{
			Streams: &fakeStreams{}, DynamoDB: dynamodb.New(dynamodb.Options{Region: "local"}), EventsTable: "t",
			Publisher: &recordingPublisher{}, StreamName: stream, Registerer: reg,
		}
	}
	if _, err := relay.New(cfg("")); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.New(cfg("analytics")); err != nil {
		t.Fatalf("a second stream on the same registry: %v", err)
	}
	_, err := relay.New(cfg("analytics"))
	var dup prometheus.AlreadyRegisteredError
	if !errors.As(err, &dup) {
		t.Fatalf("the same stream twice on one registry: New = %v, want a prometheus.AlreadyRegisteredError", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"eventpipe_relay_batches_total", "eventpipe_relay_leases_held", "eventpipe_relay_lease_takeovers_total"} {
		var streams []string
		for _, f := range families {
			if f.GetName() == name {
				for _, m := range f.GetMetric() {
					streams = append(streams, label(m, "stream"))
				}
			}
		}
		if fmt.Sprint(streams) != "[analytics events]" {
			t.Errorf("%s: series of streams %v, want [analytics events]", name, streams)
		}
	}
	for _, bad := range []string{"two words", strings.Repeat("x", 65), "ünïcode"} {
		_, err := relay.New(cfg(bad))
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != "StreamName" || !strings.Contains(err.Error(), "relay: Config") {
			t.Errorf("StreamName %q: New = %v, want an *eventstore.ValidationError naming StreamName", bad, err)
		}
	}
	for stream, want := range map[string]string{"": "relay", "events": "relay", "analytics": "relay.analytics"} {
		if got := relay.PoisonGroupFor(stream); got != want {
			t.Errorf("PoisonGroupFor(%q) = %q, want %q", stream, got, want)
		}
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// metricValue sums the counters and gauges of family name whose labels
// include match.
func metricValue(t testing.TB, reg prometheus.Gatherer, name string, match map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for k, v := range match {
				if label(m, k) != v {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
