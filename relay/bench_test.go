package relay_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/relay"
)

// countingPublisher counts the messages its inner publisher acknowledged.
type countingPublisher struct {
	message.Publisher
	n atomic.Int64
}

func (p *countingPublisher) Publish(topic string, msgs ...*message.Message) error {
	err := p.Publisher.Publish(topic, msgs...)
	if err == nil {
		p.n.Add(int64(len(msgs)))
	}
	return err
}

// BenchmarkRelayVsRawGetRecords appends b.N×20 events (10 per
// transaction, so the stream also holds a #METADATA record per append),
// then drains the stream twice in one run: a raw GetRecords loop that
// only reads, and the relay (lease, decode, publish to Kafka with acks,
// checkpoint) until every event was acknowledged. It reports both
// records/s and relay/raw (the project's target is ≥ 0.8). With the relay
// running it then appends 200 single events one by one and reports
// append → Kafka latency p50/p99 (time from the append's return to the
// record's arrival at a consumer). Nothing about time is asserted.
func BenchmarkRelayVsRawGetRecords(b *testing.B) {
	e := newEnv(b)
	events := b.N * 20
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for a := w; a < events/10; a += 8 {
				e.appendTicks(b, eventstore.Ref{Type: "tick", ID: fmt.Sprintf("agg-%d", a)}, 0, 10)
			}
		})
	}
	wg.Wait()
	records := events + events/10
	cfg := e.relayConfig(b, "bench")
	ctx := context.Background()
	arn, err := relay.StreamARN(ctx, e.db, e.ep.EventsTable)
	if err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	start := time.Now()
	shards, err := relay.Shards(ctx, cfg.Streams, arn)
	if err != nil {
		b.Fatal(err)
	}
	read := 0
	for _, sh := range shards {
		it, err := cfg.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(sh.ShardID), ShardIteratorType: st.ShardIteratorTypeTrimHorizon})
		if err != nil {
			b.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil && read < records; {
			res, err := cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
			if err != nil {
				b.Fatal(err)
			}
			read += len(res.Records)
			iter = res.NextShardIterator
		}
	}
	raw := time.Since(start)

	pub := &countingPublisher{Publisher: cfg.Publisher}
	cfg.Publisher = pub
	start = time.Now()
	stop := runRelay(b, cfg)
	for pub.n.Load() < int64(events) {
		time.Sleep(time.Millisecond)
	}
	relayed := time.Since(start)
	b.StopTimer()

	// Latency: append one event at a time and time its arrival.
	arrived := make(map[string]time.Time)
	var mu sync.Mutex
	reader, err := kafka.NewTopicReader(ctx, kafka.TopicReaderConfig{Cluster: kafka.Cluster{Brokers: e.ep.KafkaBrokers},
		Topics: []string{e.topics.Events("tick")}, Start: bus.StartLatest, MaxWait: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	pollCtx, cancelPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			recs, _ := reader.Poll(pollCtx)
			now := time.Now()
			for _, r := range recs {
				if ev, err := eventstore.Unmarshal(r.Value); err == nil {
					mu.Lock()
					arrived[ev.EventID] = now
					mu.Unlock()
				}
			}
		}
	}()
	time.Sleep(time.Second) // let the consumer reach the end of the topic
	const probes = 200
	appendedAt := map[string]time.Time{}
	for i := range probes {
		req, err := eventstore.Prepare(eventstore.Ref{Type: "tick", ID: "latency"}, int64(i), eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Ticked", i)}}, eventstore.Schema{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.store.Append(ctx, req); err != nil {
			b.Fatal(err)
		}
		appendedAt[req.Events[0].EventID] = time.Now()
		time.Sleep(10 * time.Millisecond)
	}
	deadline := time.Now().Add(30 * time.Second)
	var lat []time.Duration
	for time.Now().Before(deadline) {
		mu.Lock()
		lat = lat[:0]
		for id, at := range appendedAt {
			if got, ok := arrived[id]; ok {
				lat = append(lat, got.Sub(at))
			}
		}
		mu.Unlock()
		if len(lat) == probes {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancelPoll()
	<-polled
	_ = stop()
	if len(lat) < probes {
		b.Fatalf("only %d of %d latency probes arrived", len(lat), probes)
	}
	slices.Sort(lat)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(records)/relayed.Seconds(), "records/s")
	b.ReportMetric(float64(records)/raw.Seconds(), "raw_records/s")
	b.ReportMetric(raw.Seconds()/relayed.Seconds(), "ratio")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99_ms")
}
