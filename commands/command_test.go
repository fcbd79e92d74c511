package commands_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

func TestCommandRoundTripsThroughAMessage(t *testing.T) {
	v := int64(3)
	cmd := commands.New("Deposit", "account", "acc-1", json.RawMessage(`{"amount":5}`))
	cmd.ExpectedVersion = &v
	cmd.Actor = "u_alice"
	msg, err := cmd.ToMessage()
	if err != nil {
		t.Fatal(err)
	}
	if msg.UUID != cmd.ID || msg.Metadata.Get(bus.MetadataPartitionKey) != "acc-1" || cmd.Topic(bus.Topics{}) != "commands.account" {
		t.Fatalf("message %s key %q topic %s", msg.UUID, msg.Metadata.Get(bus.MetadataPartitionKey), cmd.Topic(bus.Topics{}))
	}
	got, err := commands.FromMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != cmd.ID || *got.ExpectedVersion != 3 || got.Actor != "u_alice" || string(got.Payload) != `{"amount":5}` || got.CorrelationID != cmd.ID {
		t.Fatalf("decoded %+v", got)
	}
}

func TestBadCommandsFailWithTypedErrors(t *testing.T) {
	valid := commands.New("Deposit", "account", "acc-1", json.RawMessage(`{}`))
	neg := int64(-1)
	for name, tc := range map[string]struct {
		payload    string
		uuid       string
		malformed  bool
		validField string
	}{
		"not json":        {payload: `{"id":`, malformed: true},
		"unknown field":   {payload: `{"id":"X","bogus":1}`, uuid: "X", malformed: true},
		"id mismatch":     {payload: mustJSON(valid), uuid: "other", malformed: true},
		"reserved char":   {payload: mustJSON(with(valid, func(c *commands.Command) { c.AggregateID = "a#b" })), uuid: valid.ID, validField: "aggregate_id"},
		"empty type":      {payload: mustJSON(with(valid, func(c *commands.Command) { c.Type = "" })), uuid: valid.ID, validField: "type"},
		"payload not obj": {payload: strings.Replace(mustJSON(valid), `"payload":{}`, `"payload":"x"`, 1), uuid: valid.ID, validField: "payload"},
		"negative ver":    {payload: mustJSON(with(valid, func(c *commands.Command) { c.ExpectedVersion = &neg })), uuid: valid.ID, validField: "expected_version"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := commands.FromMessage(message.NewMessage(tc.uuid, []byte(tc.payload)))
			if err == nil {
				t.Fatal("accepted")
			}
			var ve *eventstore.ValidationError
			switch {
			case tc.malformed && !errors.Is(err, eventstore.ErrMalformed):
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			case tc.validField != "" && (!errors.As(err, &ve) || ve.Field != tc.validField):
				t.Fatalf("error %v is not a ValidationError on %s", err, tc.validField)
			}
		})
	}
}

func with(c commands.Command, f func(*commands.Command)) commands.Command { f(&c); return c }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestProducerKeysAreParsedAndBadOnesNamed: "<key id> <key>" lines, blank
// lines and comments skipped; a malformed line, a short key, a bad or
// repeated id, or the deployment key's id is an *eventstore.ValidationError
// that never quotes a key.
func TestProducerKeysAreParsedAndBadOnesNamed(t *testing.T) {
	long := strings.Repeat("k", commands.MinKeyLength)
	keys, err := commands.ParseKeys("# producers\n\nbilling " + long + "\nops-1 " + long + "x\n")
	if err != nil || len(keys) != 2 || string(keys["billing"]) != long || string(keys["ops-1"]) != long+"x" {
		t.Fatalf("ParseKeys: %v, %v", keys, err)
	}
	for name, text := range map[string]string{
		"no key":         "billing\n",
		"short key":      "billing short-secret",
		"bad id":         "bil/ling " + long,
		"repeated id":    "a " + long + "\na " + long,
		"deployment id":  commands.DeploymentKeyID + " " + long,
		"empty key text": "billing   ",
	} {
		_, err := commands.ParseKeys(text)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v, want a ValidationError", name, err)
			continue
		}
		if strings.Contains(err.Error(), "short-secret") || strings.Contains(err.Error(), long) {
			t.Errorf("%s: the error quotes the key: %v", name, err)
		}
	}
}
