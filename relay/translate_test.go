package relay_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/relay"
)

func sAttr(v string) st.AttributeValue { return &st.AttributeValueMemberS{Value: v} }
func nAttr(v string) st.AttributeValue { return &st.AttributeValueMemberN{Value: v} }

// eventImage is a stream NEW_IMAGE of a valid EVENT item.
func eventImage() map[string]st.AttributeValue {
	return map[string]st.AttributeValue{
		"pk": sAttr("AGGREGATE#tick#a"), "sk": sAttr("EVENT#000000000001"),
		"eventId": sAttr("01HZY5Q0000000000000000000"), "aggregateType": sAttr("tick"), "aggregateId": sAttr("a"),
		"seq": nAttr("1"), "eventType": sAttr("Ticked"), "schemaVersion": nAttr("1"),
		"occurredAt": sAttr("2026-11-22T10:00:00Z"), "payload": sAttr(`{"n":1}`),
	}
}

func record(op st.OperationType, img map[string]st.AttributeValue) st.Record {
	keys := map[string]st.AttributeValue{}
	for _, k := range []string{"pk", "sk"} {
		if v, ok := img[k]; ok {
			keys[k] = v
		}
	}
	return st.Record{EventName: op, EventID: aws.String("rec-1"), Dynamodb: &st.StreamRecord{
		SequenceNumber: aws.String("000000000000000000042"), Keys: keys, NewImage: img,
	}}
}

func TestTranslateRoutesEventsAndSkipsTheRest(t *testing.T) {
	tr := relay.Translator{Topics: bus.Topics{Prefix: "t."}}
	out, ok, err := tr.Translate(record(st.OperationTypeInsert, eventImage()))
	if err != nil || !ok || out.Topic != "t.events.tick" || out.Message.UUID != "01HZY5Q0000000000000000000" ||
		out.Message.Metadata.Get(bus.MetadataPartitionKey) != "a" {
		t.Fatalf("event: %+v %v %v", out, ok, err)
	}
	for _, sk := range []string{"#METADATA", "STATE", "#SNAPSHOT", "COMMAND#c1"} {
		img := eventImage()
		img["sk"] = sAttr(sk)
		if _, ok, err := tr.Translate(record(st.OperationTypeInsert, img)); ok || err != nil {
			t.Errorf("%s: published=%v err=%v, want skipped", sk, ok, err)
		}
	}
	if _, ok, err := tr.Translate(record(st.OperationTypeRemove, eventImage())); ok || err != nil {
		t.Errorf("REMOVE: published=%v err=%v, want skipped", ok, err)
	}
	bad := eventImage()
	bad["payload"] = sAttr("{not json")
	_, _, err = tr.Translate(record(st.OperationTypeInsert, bad))
	var de *eventstore.DecodeError
	if !errors.As(err, &de) || !errors.Is(err, eventstore.ErrMalformed) || !strings.Contains(de.What, `"EVENT#000000000001"`) || !strings.Contains(de.What, "000000000000000000042") {
		t.Fatalf("bad payload: %v, want a *DecodeError naming the record", err)
	}
	if msg := relay.PoisonMessage("shard-1", record(st.OperationTypeInsert, bad), err); msg.UUID != "rec-1" || msg.Metadata.Get(relay.MetadataPoisonReason) != err.Error() {
		t.Fatalf("poison message %s %v", msg.UUID, msg.Metadata)
	}
}

// FuzzTranslate feeds arbitrary attribute values into an EVENT or
// OUTBOUND image: Translate never panics, and every failure is a
// *DecodeError.
func FuzzTranslate(f *testing.F) {
	f.Add("EVENT#000000000001", "01HZY5Q0000000000000000000", "tick", "a", "1", "Ticked", "1", "2026-11-22T10:00:00Z", `{"n":1}`, false)
	f.Add("OUTBOUND#000000000001#000", "01HZY5Q0000000000000000000", "tick", "a", "1", "x", "0", "2026-11-22T10:00:00Z", `{}`, true)
	f.Add("EVENT#x", "", "#", "", "-1", "", "1e99", "yesterday", `{"`, false)
	tr := relay.Translator{}
	f.Fuzz(func(t *testing.T, sk, id, aggType, aggID, seq, name, num, at, payload string, numAsString bool) {
		img := map[string]st.AttributeValue{
			"sk": sAttr(sk), "eventId": sAttr(id), "outboundId": sAttr(id), "aggregateType": sAttr(aggType),
			"aggregateId": sAttr(aggID), "seq": nAttr(seq), "eventType": sAttr(name), "name": sAttr(name),
			"schemaVersion": nAttr(num), "idx": nAttr(num), "occurredAt": sAttr(at), "payload": sAttr(payload),
		}
		if numAsString {
			img["seq"] = sAttr(seq)
			img["nested"] = &st.AttributeValueMemberM{Value: map[string]st.AttributeValue{"l": &st.AttributeValueMemberL{Value: []st.AttributeValue{nAttr(num)}}}}
		}
		rec := record(st.OperationTypeInsert, img)
		out, ok, err := tr.Translate(rec)
		if err != nil {
			var de *eventstore.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
			}
			_ = relay.PoisonMessage("s", rec, err)
			return
		}
		if ok && (out.Message == nil || out.Topic == "") {
			t.Fatalf("published without a message or topic: %+v", out)
		}
	})
}
