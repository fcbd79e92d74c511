package analyticsbus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/analyticsbus"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

const testEventID = "01KAQ3Z8M1000000000000000A"

func sAttr(v string) st.AttributeValue { return &st.AttributeValueMemberS{Value: v} }
func nAttr(v string) st.AttributeValue { return &st.AttributeValueMemberN{Value: v} }

// eventImage is the stream NEW_IMAGE of a raw event item as
// analytics.Store.Ingest writes it.
func eventImage() map[string]st.AttributeValue {
	k := analytics.EventKey("web", 7, testEventID)
	return map[string]st.AttributeValue{
		analytics.AttrPK: sAttr(k.PK), analytics.AttrSK: sAttr(k.SK),
		analytics.AttrSourceID: sAttr("web"), analytics.AttrShard: nAttr("7"), analytics.AttrEventID: sAttr(testEventID),
		analytics.AttrType: sAttr("page_view"), analytics.AttrSessionID: sAttr("sess-1"), analytics.AttrUserID: sAttr("u-1"),
		analytics.AttrURL: sAttr("https://example.com/a"), analytics.AttrProperties: sAttr(`{"plan":"pro","n":3}`),
		analytics.AttrCreatedAt: sAttr("2026-11-22T10:00:00.123456789Z"), analytics.AttrTTL: nAttr("1795946400"),
	}
}

func record(op st.OperationType, img map[string]st.AttributeValue) st.Record {
	keys := map[string]st.AttributeValue{}
	for _, k := range []string{analytics.AttrPK, analytics.AttrSK} {
		if v, ok := img[k]; ok {
			keys[k] = v
		}
	}
	return st.Record{EventName: op, EventID: aws.String("rec-1"), Dynamodb: &st.StreamRecord{
		SequenceNumber: aws.String("000000000000000000042"), Keys: keys, NewImage: img,
	}}
}

func TestTranslatorPublishesRawEventsOnTheSourceTopicKeyedBySession(t *testing.T) {
	tr := analyticsbus.Translator{Topics: bus.Topics{Prefix: "t."}}
	for _, op := range []st.OperationType{st.OperationTypeInsert, st.OperationTypeModify} {
		out, ok, err := tr.Translate(record(op, eventImage()))
		if err != nil || !ok {
			t.Fatalf("%s: published=%v err=%v", op, ok, err)
		}
		m := out.Message
		if out.Topic != "t.analytics.web" || m.UUID != testEventID || m.Metadata.Get(bus.MetadataPartitionKey) != "sess-1" ||
			m.Metadata.Get(analyticsbus.MetadataSourceID) != "web" || m.Metadata.Get(analyticsbus.MetadataEventType) != "page_view" {
			t.Fatalf("%s: topic %s, message %s %v", op, out.Topic, m.UUID, m.Metadata)
		}
		e, err := analyticsbus.Decode(m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		want := analytics.Event{
			SourceID: "web", Shard: 7, EventID: testEventID, Type: "page_view", SessionID: "sess-1", UserID: "u-1",
			URL: "https://example.com/a", Properties: map[string]any{"plan": "pro", "n": json.Number("3")},
			CreatedAt: time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC), ExpiresAt: time.Unix(1795946400, 0).UTC(),
		}
		got, _ := json.Marshal(e)
		wantJSON, _ := json.Marshal(want)
		if string(got) != string(wantJSON) {
			t.Errorf("%s: decoded %s, want %s", op, got, wantJSON)
		}
	}
}

func TestTranslatorSkipsExpiryAndNonEventItems(t *testing.T) {
	tr := analyticsbus.Translator{}
	if _, ok, err := tr.Translate(record(st.OperationTypeRemove, eventImage())); ok || err != nil {
		t.Errorf("REMOVE (TTL expiry): published=%v err=%v, want skipped", ok, err)
	}
	session := analytics.SessionKey("web", "sess-1")
	hourly := analytics.AggregationKey("web", analytics.Hourly, "2026-11-22T10:00:00Z")
	daily := analytics.AggregationKey("web", analytics.Daily, "2026-11-22")
	for _, k := range []analytics.Key{session, hourly, daily, {PK: "SOURCE#web", SK: "SOMETHING#else"}, {PK: "SOURCE#web"}} {
		img := map[string]st.AttributeValue{analytics.AttrPK: sAttr(k.PK), analytics.AttrEvents: nAttr("3")}
		if k.SK != "" {
			img[analytics.AttrSK] = sAttr(k.SK)
		}
		for _, op := range []st.OperationType{st.OperationTypeInsert, st.OperationTypeModify} {
			if _, ok, err := tr.Translate(record(op, img)); ok || err != nil {
				t.Errorf("%s %q: published=%v err=%v, want skipped", op, k.SK, ok, err)
			}
		}
	}
}

func TestTranslatorRefusesRecordsItCannotDecode(t *testing.T) {
	tr := analyticsbus.Translator{}
	without := func(attr string) st.Record {
		img := eventImage()
		delete(img, attr)
		return record(st.OperationTypeInsert, img)
	}
	with := func(attr string, v st.AttributeValue) st.Record {
		img := eventImage()
		img[attr] = v
		return record(st.OperationTypeInsert, img)
	}
	noImage := record(st.OperationTypeInsert, eventImage())
	noImage.Dynamodb.NewImage = nil
	cases := []struct {
		name   string
		rec    st.Record
		reason string
	}{
		{"no dynamodb section", st.Record{EventName: st.OperationTypeInsert}, "no dynamodb section"},
		{"no NEW_IMAGE", noImage, "no NEW_IMAGE"},
		{"createdAt not a time", with(analytics.AttrCreatedAt, sAttr("yesterday")), "createdAt"},
		{"shard not a number", with(analytics.AttrShard, sAttr("seven")), "shard"},
		{"properties not JSON", with(analytics.AttrProperties, sAttr("{nope")), "properties"},
		{"no session", without(analytics.AttrSessionID), "sessionId is missing"},
		{"no type", without(analytics.AttrType), "type is missing"},
		{"no createdAt", without(analytics.AttrCreatedAt), "createdAt is missing"},
		{"event id not a ULID", with(analytics.AttrEventID, sAttr("not-a-ulid")), "eventId"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ok, err := tr.Translate(c.rec)
			var de *eventstore.DecodeError
			if ok || !errors.As(err, &de) || !eventstore.IsPermanent(err) {
				t.Fatalf("published=%v err=%v, want a *eventstore.DecodeError", ok, err)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("reason %q does not mention %q", err, c.reason)
			}
			if c.rec.Dynamodb != nil && !strings.Contains(de.What, "000000000000000000042") {
				t.Errorf("reason %q does not name the stream record", err)
			}
		})
	}
}
