package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/analyticsbus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestAnalyticsRelayCarriesRawEventsBesideTheEventsRelay ingests 300 raw
// events of two sources (12 sessions, each spread over the table's write
// shards) and runs the analytics relay and the events relay in one
// process, as `eventpipe relay` does: one worker id, one lease table, one
// Prometheus registry. Every raw event arrives exactly once on
// analytics.<source>, keyed by its session id, all of a session on one
// partition, and decodes to the ingested event; a session and an
// aggregation item written to the table are skipped, not published; the
// events relay still publishes the event store's events; each stream
// keeps its own leases in the shared table, and the metrics of both are
// told apart by their stream label.
func TestAnalyticsRelayCarriesRawEventsBesideTheEventsRelay(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	e := newEnv(t)
	ctx := context.Background()
	ep := e.ep
	ep.AnalyticsTable = testenv.UniqueName(t, "analytics")
	if err := migrate.CreateAnalyticsTable(ctx, e.db, ep.AnalyticsTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, e.db, ep.AnalyticsTable) })
	store, err := analytics.New(analytics.Config{Client: e.db, Table: ep.AnalyticsTable, Shards: 8})
	if err != nil {
		t.Fatal(err)
	}

	// Each Ingest call carries one event of every session of its source,
	// so a session's events are written by successive calls, in order.
	sources := []string{"web", "app"}
	ingested := map[string]analytics.Event{} // by event id
	bySession := map[string][]string{}       // session id → event ids in ingest order
	ingest := func(source string, in []analytics.EventInput) {
		t.Helper()
		events, err := store.Ingest(ctx, source, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			ingested[ev.EventID] = ev
			bySession[ev.SessionID] = append(bySession[ev.SessionID], ev.EventID)
		}
	}
	for round := range 25 {
		for _, source := range sources {
			var in []analytics.EventInput
			for s := range 6 {
				in = append(in, analytics.EventInput{
					Type: "page_view", SessionID: fmt.Sprintf("%s-session-%d", source, s), UserID: fmt.Sprintf("user-%d", s%3),
					URL: fmt.Sprintf("https://example.com/%d", round), Properties: map[string]any{"round": round},
				})
			}
			ingest(source, in)
		}
	}
	tick := eventstore.Ref{Type: "tick", ID: "beside-analytics"}
	e.appendTicks(t, tick, 0, 3)

	reg := prometheus.NewRegistry()
	stops := map[string]func() error{}
	for _, stream := range eventpipe.RelayStreams() {
		r, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{
			Stream: stream, Process: eventpipe.Process{Catalog: eventpipe.NewCatalog(), Endpoints: ep}, WorkerID: "w1", Registerer: reg,
			LeaseDuration: 2 * time.Second, DiscoveryInterval: 250 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(runCtx) }()
		var once sync.Once
		var result error
		stops[stream] = func() error {
			once.Do(func() { cancel(); result = <-done })
			return result
		}
		t.Cleanup(func() { _ = stops[stream]() })
	}
	records := func(stream, outcome string) float64 {
		return metricValue(t, reg, "eventpipe_relay_records_total", map[string]string{"stream": stream, "outcome": outcome})
	}
	waitFor := func(what string, done func() bool) {
		t.Helper()
		integration.Await(t, what, func() error {
			if !done() {
				return fmt.Errorf("analytics published %v skipped %v; events published %v",
					records("analytics", "published"), records("analytics", "skipped"), records("events", "published"))
			}
			return nil
		})
	}
	waitFor("all 300 raw events and 3 events published", func() bool {
		return records("analytics", "published") == 300 && records("events", "published") == 3
	})

	// Items the aggregation consumer writes are not raw events.
	for _, k := range []analytics.Key{analytics.SessionKey("web", "web-session-0"), analytics.AggregationKey("app", analytics.Hourly, "2026-11-22T10:00:00Z")} {
		item := k.Attributes()
		item[analytics.AttrEvents] = &types.AttributeValueMemberN{Value: "25"}
		if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(ep.AnalyticsTable), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	ingest("web", []analytics.EventInput{{Type: "click", SessionID: "web-session-0"}})
	waitFor("the session and aggregation items skipped and the last event published", func() bool {
		return records("analytics", "skipped") == 2 && records("analytics", "published") == 301
	})
	for _, stream := range eventpipe.RelayStreams() {
		if err := stops[stream](); err != nil {
			t.Fatalf("clean stop of the %s relay: %v", stream, err)
		}
		if n := records(stream, "poison"); n != 0 {
			t.Errorf("%s relay poisoned %v records", stream, n)
		}
	}

	// Kafka: every raw event once, keyed by session, a session on one
	// partition, decoding to what was ingested.
	var topics []string
	for _, source := range sources {
		topics = append(topics, e.topics.Analytics(source))
	}
	got := readAll(t, ep.KafkaBrokers, topics, len(ingested))
	seen := map[string]bool{}
	partitionOf := map[string]string{} // session → topic/partition
	arrived := map[string][]string{}   // session → event ids in partition order
	for _, r := range got {
		ev, err := analyticsbus.Decode(r.Value)
		if err != nil {
			t.Fatalf("%s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		want, ok := ingested[ev.EventID]
		switch {
		case !ok:
			t.Errorf("%s/%d@%d: event %s was not ingested", r.Topic, r.Partition, r.Offset, ev.EventID)
			continue
		case seen[ev.EventID]:
			t.Errorf("%s/%d@%d: event %s arrived twice", r.Topic, r.Partition, r.Offset, ev.EventID)
		case r.Topic != e.topics.Analytics(want.SourceID) || string(r.Key) != want.SessionID:
			t.Errorf("event %s on %s keyed %q, want %s keyed %q", ev.EventID, r.Topic, r.Key, e.topics.Analytics(want.SourceID), want.SessionID)
		}
		seen[ev.EventID] = true
		gotJSON, _ := json.Marshal(ev)
		wantJSON, _ := json.Marshal(want)
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("event %s decoded as %s, ingested %s", ev.EventID, gotJSON, wantJSON)
		}
		at := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
		if p, ok := partitionOf[want.SessionID]; ok && p != at {
			t.Errorf("session %s on %s and %s", want.SessionID, p, at)
		}
		partitionOf[want.SessionID] = at
		arrived[want.SessionID] = append(arrived[want.SessionID], ev.EventID)
	}
	if len(seen) != len(ingested) || len(got) != len(ingested) {
		t.Errorf("%d records, %d distinct events on Kafka; %d ingested", len(got), len(seen), len(ingested))
	}
	// DynamoDB Local's stream has one shard, so the stream holds a
	// session's events in write order and so must the partition. On AWS
	// the write shards (partition keys) of one session map to different
	// stream shards, which the relay reads independently: consumers order
	// a session's events by createdAt / event id, not by arrival.
	arn, err := relay.StreamARN(ctx, e.db, ep.AnalyticsTable)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := relay.Shards(ctx, testenv.DynamoDBStreams(t), arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) == 1 {
		for session, ids := range bySession {
			if fmt.Sprint(arrived[session]) != fmt.Sprint(ids) {
				t.Errorf("session %s arrived in order %v, ingested %v", session, arrived[session], ids)
			}
		}
	} else {
		t.Logf("the analytics stream has %d shards: per-session arrival order is not checked", len(shards))
	}

	// The events relay kept publishing the event store's events, and
	// nothing of the analytics table reached an events topic.
	want := map[string]int64{tick.ID: 3}
	if d := readUntil(t, ep.KafkaBrokers, e.topics.Events("tick"), complete(want)); coverage(t, d, want) != 0 || len(d) != 3 {
		t.Errorf("events topic holds %d records, want the 3 ticks once", len(d))
	}

	// One lease table, a lease per shard of each stream, told apart by
	// stream ARN; both relays released theirs after a checkpoint.
	arns := map[string]string{}
	for _, stream := range eventpipe.RelayStreams() {
		arn, leases, err := eventpipe.RelayStreamStatus(ctx, ep, stream)
		if err != nil {
			t.Fatal(err)
		}
		arns[arn] = stream
		if len(leases) == 0 {
			t.Errorf("%s: no leases in %s", stream, ep.LeasesTable)
		}
		for _, l := range leases {
			if l.StreamARN != arn || l.Owner != "" || l.Checkpoint == "" {
				t.Errorf("%s: lease %+v, want a released lease of %s with a checkpoint", stream, l, arn)
			}
		}
	}
	if len(arns) != 2 {
		t.Errorf("both relays read stream %v", arns)
	}
	// Every relay series of the shared registry names its stream.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		streams := map[string]bool{}
		for _, m := range f.GetMetric() {
			streams[label(m, "stream")] = true
		}
		if !streams["events"] || !streams["analytics"] || len(streams) != 2 {
			t.Errorf("%s: series of streams %v, want events and analytics", f.GetName(), streams)
		}
	}
}

// readAll reads topics from their start until at least n records
// arrived (failing t when none arrives for integration.HangAfter), then
// for one more second to catch any extra, and returns them in partition
// order.
func readAll(t testing.TB, brokers, topics []string, n int) []kafka.Record {
	t.Helper()
	r := newTopicReader(t, brokers, topics...)
	defer r.Close()
	var got []kafka.Record
	integration.AwaitProgress(t, fmt.Sprintf("records on %v", topics), func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		recs, _ := r.Poll(ctx) // a failed fetch is retried; a stuck read fails the wait
		got = append(got, recs...)
		return int64(len(got))
	}, int64(n))
	extra, done := context.WithTimeout(context.Background(), time.Second)
	defer done()
	for extra.Err() == nil {
		recs, _ := r.Poll(extra)
		got = append(got, recs...)
	}
	return got
}
