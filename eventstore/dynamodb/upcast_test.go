package dynamodb_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

func ulidTime(t testing.TB, id string) time.Time {
	t.Helper()
	u, err := ulid.ParseStrict(id)
	if err != nil {
		t.Fatal(err)
	}
	return ulid.Time(u.Time())
}

// TestUpcastingReadsAStoredV1EventAsV2 writes a v1 event straight into
// the table (as an old release would have), then reads it through a store
// whose upcaster splits "name" into first/last: Load and ListByType see
// v2, the item in the table stays v1.
func TestUpcastingReadsAStoredV1EventAsV2(t *testing.T) {
	ctx := ctxT(t)
	ups := &eventstore.Upcasters{}
	ups.MustRegister("CustomerRegistered", 1, func(p json.RawMessage) (json.RawMessage, error) {
		var v1 struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(p, &v1); err != nil {
			return nil, err
		}
		first, last := v1.Name, ""
		for i, r := range v1.Name {
			if r == ' ' {
				first, last = v1.Name[:i], v1.Name[i+1:]
				break
			}
		}
		return json.Marshal(map[string]string{"first": first, "last": last})
	})
	s, client, table := newStore(t, func(c *store.Config) { c.Schema.Upcasters = ups })
	id := ulid.Make().String()
	s1 := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	item := map[string]types.AttributeValue{
		"pk": s1("AGGREGATE#customer#c-1"), "sk": s1("EVENT#000000000001"),
		"gsi1pk": s1("EVENT_TYPE#CustomerRegistered"), "gsi1sk": s1("EVENT#" + id),
		"eventId": s1(id), "aggregateType": s1("customer"), "aggregateId": s1("c-1"),
		"seq": &types.AttributeValueMemberN{Value: "1"}, "eventType": s1("CustomerRegistered"),
		"schemaVersion": &types.AttributeValueMemberN{Value: "1"}, "occurredAt": s1("2024-01-02T03:04:05.123Z"),
		"payload": s1(`{"name":"John Brown"}`),
	}
	if _, err := client.PutItem(ctx, &ddb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	ref := eventstore.Ref{Type: "customer", ID: "c-1"}
	events, err := s.Load(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	check := func(where string, e eventstore.Envelope) {
		t.Helper()
		if e.SchemaVersion != 2 || string(e.Payload) != `{"first":"John","last":"Brown"}` {
			t.Fatalf("%s: v%d %s, want v2 first/last", where, e.SchemaVersion, e.Payload)
		}
	}
	if len(events) != 1 {
		t.Fatalf("loaded %d events", len(events))
	}
	check("Load", events[0])
	page, err := s.ListByType(ctx, store.TypeQuery{EventType: "CustomerRegistered"})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("list: %d events, %v", len(page.Events), err)
	}
	check("ListByType", page.Events[0])
	if rows := dumpPartition(t, client, table, ref); len(rows) != 1 || rows[0] != canonical(item) {
		t.Fatalf("stored item changed:\n%v", rows)
	}
	// New events of the type are written at the current version.
	if ups.Current("CustomerRegistered") != 2 {
		t.Fatalf("current version %d", ups.Current("CustomerRegistered"))
	}
	req, err := eventstore.Prepare(eventstore.Ref{Type: "customer", ID: "c-2"}, 0, eventstore.Change{Events: []eventstore.NewEvent{
		eventstore.Event("CustomerRegistered", map[string]string{"first": "Ann", "last": "Lee"}),
	}}, s.Schema())
	if err != nil || req.Events[0].SchemaVersion != 2 {
		t.Fatalf("prepared v%d, %v", req.Events[0].SchemaVersion, err)
	}
}
