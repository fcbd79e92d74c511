package poison_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/poison"
)

// TestPoisonMessageRedriveDropsThePoisonFieldsOfItsFormAndKeepsTheKey
// covers the three poison forms: Watermill's middleware and the
// aggregator's lose their poison fields and keep the rest, the partition
// key comes from the record key when the metadata lacks it, and a relay
// record, which names no topic, is refused with ErrNoOrigin.
func TestPoisonMessageRedriveDropsThePoisonFieldsOfItsFormAndKeepsTheKey(t *testing.T) {
	ref := poison.Ref{Topic: "ns.poison.g", Partition: 2, Offset: 7}
	for _, tc := range []struct {
		name       string
		md         message.Metadata
		key        string
		wantTopic  string
		wantOrigin poison.Origin
		wantMD     message.Metadata
	}{
		{"watermill", message.Metadata{poison.KeyReasonPoisoned: "handler panic", poison.KeyTopicPoisoned: "ns.commands.todo",
			poison.KeyHandlerPoisoned: "commands:ns.commands.todo", poison.KeySubscriberPoisoned: "sub", bus.MetadataPartitionKey: "t1",
			"correlation_id": "c1", poison.KeyRedrivenFrom: "old"}, "t1",
			"ns.commands.todo", poison.Origin{Topic: "ns.commands.todo", Partition: -1, Offset: -1, Handler: "commands:ns.commands.todo"},
			message.Metadata{bus.MetadataPartitionKey: "t1", "correlation_id": "c1", poison.KeyRedrivenFrom: ref.String()}},
		{"aggregator", message.Metadata{poison.KeyReason: "not an analytics event", poison.KeyTopic: "ns.analytics.web",
			poison.KeyPartition: "3", poison.KeyOffset: "41"}, "session-9",
			"ns.analytics.web", poison.Origin{Topic: "ns.analytics.web", Partition: 3, Offset: 41},
			message.Metadata{bus.MetadataPartitionKey: "session-9", poison.KeyRedrivenFrom: ref.String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := poison.Message{Ref: ref, Key: tc.key, UUID: "u1", Metadata: tc.md, Payload: []byte(`{"x":1}`)}
			if got := m.Origin(); got != tc.wantOrigin {
				t.Fatalf("Origin() = %+v, want %+v", got, tc.wantOrigin)
			}
			topic, msg, err := m.Redrive()
			if err != nil || topic != tc.wantTopic || msg.UUID != "u1" || string(msg.Payload) != `{"x":1}` {
				t.Fatalf("Redrive() = %s, %+v, %v", topic, msg, err)
			}
			if len(msg.Metadata) != len(tc.wantMD) {
				t.Fatalf("metadata %v, want %v", msg.Metadata, tc.wantMD)
			}
			for k, v := range tc.wantMD {
				if msg.Metadata.Get(k) != v {
					t.Fatalf("metadata %v, want %v", msg.Metadata, tc.wantMD)
				}
			}
			if _, ok := tc.md[poison.KeyRedrivenFrom]; ok && tc.md[poison.KeyRedrivenFrom] != "old" {
				t.Fatal("Redrive changed the message's own metadata")
			}
		})
	}
	relay := poison.Message{Ref: ref, Metadata: message.Metadata{poison.KeyReason: "bad", poison.KeyShardID: "s", poison.KeyStreamSeq: "1"}}
	if _, _, err := relay.Redrive(); !errors.Is(err, poison.ErrNoOrigin) {
		t.Fatalf("relay record Redrive() error %v, want ErrNoOrigin", err)
	}
	if relay.Origin().Known() || relay.Reason() != "bad" {
		t.Fatalf("relay record origin %+v reason %q", relay.Origin(), relay.Reason())
	}
}
