package dynamodb_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// TestAppendWritesEventsAsTopLevelAttributesAndLoadsThemBack covers append,
// load, load from a version and current version: events stored with the envelope's fields as
// attributes, read back whole, from a sequence, and page by page.
func TestAppendWritesEventsAsTopLevelAttributesAndLoadsThemBack(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, nil)
	ref := eventstore.Ref{Type: "order", ID: "1234"}
	meta := eventstore.Metadata{CorrelationID: "corr-1", Actor: "u_alice", IP: "10.0.0.1",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	req, err := eventstore.Prepare(ref, 0, eventstore.Change{
		CommandID: "cmd-1", Metadata: meta,
		Events: []eventstore.NewEvent{
			eventstore.Event("OrderPlaced", map[string]int{"total": 4500}),
			eventstore.Event("PaymentProcessed", map[string]int{"amount": 4500}),
		},
	}, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstSeq != 1 || res.LastSeq != 2 || len(res.EventIDs) != 2 || res.Duplicate {
		t.Fatalf("result %+v", res)
	}
	for i := 3; i <= 7; i++ {
		appendEvents(t, s, ref, int64(i-1), "OrderShipped")
	}

	raw, err := client.GetItem(ctx, &ddb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "AGGREGATE#order#1234"}, "sk": &types.AttributeValueMemberS{Value: "EVENT#000000000001"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"gsi1pk": "EVENT_TYPE#OrderPlaced", "gsi1sk": "EVENT#" + res.EventIDs[0], "eventId": res.EventIDs[0],
		"aggregateType": "order", "aggregateId": "1234", "eventType": "OrderPlaced", "payload": `{"total":4500}`,
		"correlationId": "corr-1", "causationId": "cmd-1", "actor": "u_alice", "ip": "10.0.0.1",
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	for k, v := range want {
		if got, ok := raw.Item[k].(*types.AttributeValueMemberS); !ok || got.Value != v {
			t.Errorf("attribute %s = %#v, want %q", k, raw.Item[k], v)
		}
	}
	if got := raw.Item["seq"].(*types.AttributeValueMemberN).Value; got != "1" {
		t.Errorf("seq = %s", got)
	}
	fromItem, err := store.EnvelopeFromItem(raw.Item)
	if err != nil {
		t.Fatal(err)
	}
	if b1, b2 := mustMarshal(t, fromItem), mustMarshal(t, req.Events[0]); string(b1) != string(b2) {
		t.Errorf("envelope from item\n%s\nwant\n%s", b1, b2)
	}

	all, err := s.Load(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 7 {
		t.Fatalf("loaded %d events, want 7", len(all))
	}
	for i, e := range all {
		if e.Sequence != int64(i+1) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
	}
	if string(mustMarshal(t, all[1])) != string(mustMarshal(t, req.Events[1])) {
		t.Errorf("loaded %s, appended %s", mustMarshal(t, all[1]), mustMarshal(t, req.Events[1]))
	}
	from5, err := s.Load(ctx, ref, 5)
	if err != nil || len(from5) != 2 || from5[0].Sequence != 6 {
		t.Fatalf("load after 5: %d events, %v", len(from5), err)
	}
	var paged []int64
	for after := int64(0); ; {
		page, err := s.LoadPage(ctx, ref, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			paged = append(paged, e.Sequence)
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].Sequence
	}
	if fmt.Sprint(paged) != "[1 2 3 4 5 6 7]" {
		t.Errorf("pages gave %v", paged)
	}
	if v, err := s.Version(ctx, ref); err != nil || v != 7 {
		t.Errorf("version %d, %v; want 7", v, err)
	}
}

func mustMarshal(t testing.TB, e eventstore.Envelope) []byte {
	t.Helper()
	b, err := eventstore.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOperationsOnUnknownAggregateReturnNotFound covers the reads that
// need an existing aggregate.
func TestOperationsOnUnknownAggregateReturnNotFound(t *testing.T) {
	ctx := ctxT(t)
	s, _, _ := newStore(t, nil)
	ref := eventstore.Ref{Type: "order", ID: "nope"}
	checks := map[string]error{}
	_, checks["Load"] = s.Load(ctx, ref, 0)
	_, checks["LoadPage"] = s.LoadPage(ctx, ref, 0, 10)
	_, checks["Version"] = s.Version(ctx, ref)
	_, checks["State"] = s.State(ctx, ref)
	_, checks["Snapshot"] = s.Snapshot(ctx, ref)
	checks["PutSnapshot"] = s.PutSnapshot(ctx, ref, eventstore.Stored{Seq: 1, Data: json.RawMessage(`{}`)})
	for op, err := range checks {
		if !errors.Is(err, eventstore.ErrAggregateNotFound) {
			t.Errorf("%s: %v, want ErrAggregateNotFound", op, err)
		}
	}
	if _, err := s.CommandResult(ctx, ref, "cmd"); !errors.Is(err, eventstore.ErrCommandNotFound) {
		t.Errorf("CommandResult: %v, want ErrCommandNotFound", err)
	}
}

// TestAppendRejectsBadInputAndLeavesTableUnchanged shows, for each bad
// input, the typed error and that the table (the aggregate's partition
// and everything else) is byte-for-byte the same afterwards.
func TestAppendRejectsBadInputAndLeavesTableUnchanged(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, func(c *store.Config) {
		c.Schema.Types = eventstore.NewEventTypes("Deposited", "Withdrawn")
	})
	ref := eventstore.Ref{Type: "account", ID: "a-1"}
	appendEvents(t, s, ref, 0, "Deposited", "Withdrawn")

	// good returns a valid request at version 2 with n events.
	good := func(n int) eventstore.AppendRequest {
		var ch eventstore.Change
		for range n {
			ch.Events = append(ch.Events, eventstore.Event("Deposited", map[string]int{"amount": 1}))
		}
		req, err := eventstore.Prepare(ref, 2, ch, s.Schema())
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	big := `{"blob":"` + strings.Repeat("x", store.MaxItemSize) + `"}`
	almostBig := `{"blob":"` + strings.Repeat("x", 390*1024) + `"}`
	validation := func(field string) func(error) bool {
		return func(err error) bool {
			var ve *eventstore.ValidationError
			return errors.As(err, &ve) && strings.Contains(ve.Field, field)
		}
	}
	cases := []struct {
		name   string
		mutate func(*eventstore.AppendRequest)
		is     func(error) bool
	}{
		{"empty aggregate type", func(r *eventstore.AppendRequest) { r.Aggregate.Type = "" }, validation("aggregate_type")},
		{"# in aggregate type", func(r *eventstore.AppendRequest) { setRef(r, "acc#ount", ref.ID) }, validation("aggregate_type")},
		{"empty aggregate id", func(r *eventstore.AppendRequest) { setRef(r, ref.Type, "") }, validation("aggregate_id")},
		{"# in aggregate id", func(r *eventstore.AppendRequest) { setRef(r, ref.Type, "a-1#EVENT") }, validation("aggregate_id")},
		{"empty event type", func(r *eventstore.AppendRequest) { r.Events[0].EventType = "" }, validation("event_type")},
		{"# in event type", func(r *eventstore.AppendRequest) { r.Events[0].EventType = "Deposited#1" }, validation("event_type")},
		{"unknown event type", func(r *eventstore.AppendRequest) { r.Events[0].EventType = "Stolen" }, validation("event_type")},
		{"malformed JSON payload", func(r *eventstore.AppendRequest) { r.Events[0].Payload = json.RawMessage(`{"amount":`) }, validation("payload")},
		{"empty payload", func(r *eventstore.AppendRequest) { r.Events[0].Payload = nil }, validation("payload")},
		{"malformed STATE", func(r *eventstore.AppendRequest) { r.State = json.RawMessage(`{`) }, validation("state")},
		{"# in command id", func(r *eventstore.AppendRequest) { r.CommandID = "c#1" }, validation("command_id")},
		{"sequence gap", func(r *eventstore.AppendRequest) { r.Events[0].Sequence = 4 }, validation("sequence")},
		{"event not a ULID", func(r *eventstore.AppendRequest) { r.Events[0].EventID = "evt-1" }, validation("event_id")},
		{"negative expected version", func(r *eventstore.AppendRequest) { r.ExpectedVersion = -1 }, validation("expected_version")},
		{"outbound of another append", func(r *eventstore.AppendRequest) {
			r.Outbound = []eventstore.Outbound{{Seq: 1, Name: "x", Payload: json.RawMessage(`{}`)}}
		}, validation("outbound")},
		{"item over 400 KB", func(r *eventstore.AppendRequest) { r.Events[0].Payload = json.RawMessage(big) }, is(eventstore.ErrItemTooLarge)},
		{"STATE over 400 KB", func(r *eventstore.AppendRequest) { r.State = json.RawMessage(big) }, is(eventstore.ErrItemTooLarge)},
		{"more than 100 items", func(r *eventstore.AppendRequest) { *r = good(100) }, is(eventstore.ErrTooManyItems)},
		{"more than 4 MB", func(r *eventstore.AppendRequest) {
			*r = good(11)
			for i := range r.Events {
				r.Events[i].Payload = json.RawMessage(almostBig)
			}
		}, is(eventstore.ErrTransactionTooLarge)},
		{"stale expected version", func(r *eventstore.AppendRequest) { restage(r, 1) }, func(err error) bool {
			var ce *eventstore.ConcurrencyError
			return errors.As(err, &ce) && ce.Expected == 1 && ce.Actual == 2 && ce.Aggregate == ref
		}},
		{"future expected version", func(r *eventstore.AppendRequest) { restage(r, 5) }, func(err error) bool {
			var ce *eventstore.ConcurrencyError
			return errors.As(err, &ce) && ce.Expected == 5 && ce.Actual == 2
		}},
		{"unknown aggregate", func(r *eventstore.AppendRequest) { setRef(r, ref.Type, "never-written") }, is(eventstore.ErrAggregateNotFound)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := dumpTable(t, client, table)
			partBefore := dumpPartition(t, client, table, ref)
			req := good(1)
			tc.mutate(&req)
			_, err := s.Append(ctx, req)
			if err == nil || !tc.is(err) {
				t.Fatalf("Append returned %v (%T)", err, errors.Unwrap(err))
			}
			if !strings.HasPrefix(err.Error(), "append ") {
				t.Errorf("error %q does not say what failed", err)
			}
			if after := dumpTable(t, client, table); after != before {
				t.Fatalf("table changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if partAfter := dumpPartition(t, client, table, ref); strings.Join(partAfter, "\n") != strings.Join(partBefore, "\n") || len(partBefore) != 3 {
				t.Fatalf("partition changed or unexpected: %d items before", len(partBefore))
			}
		})
	}
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

// setRef moves a request (and its events) to another aggregate.
func setRef(r *eventstore.AppendRequest, typ, id string) {
	r.Aggregate = eventstore.Ref{Type: typ, ID: id}
	for i := range r.Events {
		r.Events[i].AggregateType, r.Events[i].AggregateID = typ, id
	}
}

// restage renumbers a request to another expected version.
func restage(r *eventstore.AppendRequest, expected int64) {
	r.ExpectedVersion = expected
	for i := range r.Events {
		r.Events[i].Sequence = expected + int64(i) + 1
	}
}

// TestSameCommandIDAppendsOnce sends one command id three times: with the
// same expected version (stale by then) and with the current one. Only
// the first writes; the others return its result.
func TestSameCommandIDAppendsOnce(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, nil)
	ref := eventstore.Ref{Type: "order", ID: "dup"}
	ch := eventstore.Change{CommandID: "01JCMD", Events: []eventstore.NewEvent{
		eventstore.Event("OrderPlaced", map[string]int{"total": 1}), eventstore.Event("OrderPaid", map[string]int{"total": 1}),
	}}
	req, err := eventstore.Prepare(ref, 0, ch, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	after := dumpTable(t, client, table)
	for _, expected := range []int64{0, 2} {
		again, err := eventstore.Prepare(ref, expected, ch, s.Schema())
		if err != nil {
			t.Fatal(err)
		}
		dup, err := s.Append(ctx, again)
		if err != nil {
			t.Fatalf("redelivery at expected %d: %v", expected, err)
		}
		if !dup.Duplicate || dup.FirstSeq != first.FirstSeq || dup.LastSeq != first.LastSeq || fmt.Sprint(dup.EventIDs) != fmt.Sprint(first.EventIDs) {
			t.Fatalf("redelivery at expected %d returned %+v, want the first result %+v", expected, dup, first)
		}
		if got := dumpTable(t, client, table); got != after {
			t.Fatalf("redelivery at expected %d changed the table", expected)
		}
	}
	events, err := s.Load(ctx, ref, 0)
	if err != nil || len(events) != 2 {
		t.Fatalf("log has %d events (%v), want 2", len(events), err)
	}
	rec, err := s.CommandResult(ctx, ref, "01JCMD")
	if err != nil || rec.LastSeq != 2 {
		t.Fatalf("command record %+v, %v", rec, err)
	}
}
