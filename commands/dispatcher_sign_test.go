package commands_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
)

var (
	producerKey = []byte("0123456789abcdef0123456789abcdef-producer")
	otherKey    = []byte("0123456789abcdef0123456789abcdef-stranger")
)

// signedDispatcher is todoDispatcher with the producer key "billing",
// requiring signed commands when require is set.
func signedDispatcher(t *testing.T, replies message.Publisher, require bool) (*commands.Dispatcher, *memstore.Store) {
	t.Helper()
	return todoDispatcherWith(t, commands.DispatcherConfig{Replies: replies, Keys: commands.Keys{"billing": producerKey}, RequireSigned: require})
}

// todoCommand is a CreateTodo for id with an actor and IP its sender claims.
func todoCommand(t *testing.T, id string) commands.Command {
	t.Helper()
	cmd, err := commands.NewJSON(todo.CreateTodo, todo.AggregateType, id, todo.TodoData{Title: "pay <the> bill & more"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Actor, cmd.IP = "alice", "10.1.2.3"
	return cmd
}

// signedMessage encodes cmd, signed with s when it has a key.
func signedMessage(t *testing.T, cmd commands.Command, s commands.Signer) *message.Message {
	t.Helper()
	msg, err := cmd.ToMessage()
	if err != nil {
		t.Fatal(err)
	}
	if s.Enabled() {
		s.SignMessage(msg, cmd)
	}
	return msg
}

// stored returns the events of todo id (none when it has no events).
func stored(t *testing.T, store *memstore.Store, id string) []eventstore.Envelope {
	t.Helper()
	evs, err := store.Load(t.Context(), eventstore.Ref{Type: todo.AggregateType, ID: id}, 0)
	if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Fatal(err)
	}
	return evs
}

// TestACommandsActorOnTheBusIsStoredAsClaimedUnlessSigned: an unsigned
// command from the bus runs (signatures are not required) and its events
// record its actor and IP as claimed; the same command signed with a
// producer key records them as signed, and its answer is signed for it.
func TestACommandsActorOnTheBusIsStoredAsClaimedUnlessSigned(t *testing.T) {
	pub := &capture{}
	d, store := signedDispatcher(t, pub, false)
	signer := commands.Signer{KeyID: "billing", Key: producerKey}
	for _, tc := range []struct {
		id     string
		signer commands.Signer
		source string
	}{
		{"claimed-1", commands.Signer{}, eventstore.ActorClaimed},
		{"signed-1", signer, eventstore.ActorSigned},
	} {
		cmd := todoCommand(t, tc.id)
		msg := signedMessage(t, cmd, tc.signer)
		if err := d.HandleMessage(msg); err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		evs := stored(t, store, tc.id)
		if len(evs) != 1 {
			t.Fatalf("%s: %d events stored, want 1", tc.id, len(evs))
		}
		if m := evs[0].Metadata; m.Actor != "alice" || m.IP != "10.1.2.3" || m.ActorSource != tc.source || m.ActorVerified() != (tc.source == eventstore.ActorSigned) {
			t.Errorf("%s: metadata %+v, want actor alice from 10.1.2.3 recorded as %s", tc.id, m, tc.source)
		}
		res, err := commands.ResultFromMessage(pub.take(t).msg)
		if err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("%s: answer %+v, %v", tc.id, res, err)
		}
		if tc.signer.Enabled() && !commands.VerifyResult(producerKey, msg.Metadata.Get(commands.MetadataSignature), res) {
			t.Errorf("%s: the answer %+v is not signed for the command", tc.id, res)
		}
		if !tc.signer.Enabled() && res.Signature != "" {
			t.Errorf("%s: the answer to an unsigned command carries a signature", tc.id)
		}
	}
}

// TestUnsignedAndForgedCommandsAreRefusedWhereSignaturesAreRequired: with
// signed commands required, a command that is unsigned, signed with a key
// the handlers do not hold, or signed under a known key id with another
// key is answered invalid with its refusal code, returned as a permanent
// error (poisoned), and stores nothing, not even a record of its id: the
// genuine command under the same id is then accepted.
func TestUnsignedAndForgedCommandsAreRefusedWhereSignaturesAreRequired(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signer commands.Signer
		code   eventstore.Code
	}{
		{"unsigned", commands.Signer{}, commands.ErrUnsigned},
		{"unknown key id", commands.Signer{KeyID: "stranger", Key: otherKey}, commands.ErrBadSignature},
		{"forged under a known key id", commands.Signer{KeyID: "billing", Key: otherKey}, commands.ErrBadSignature},
		{"the deployment's key id, which the handlers do not hold", commands.Signer{KeyID: commands.DeploymentKeyID, Key: otherKey}, commands.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &capture{}
			d, store := signedDispatcher(t, pub, true)
			cmd := todoCommand(t, "t1")
			err := d.HandleMessage(signedMessage(t, cmd, tc.signer))
			if !eventstore.IsPermanent(err) || !errors.Is(err, tc.code) {
				t.Fatalf("HandleMessage: %v; want a permanent error matching %s", err, tc.code)
			}
			res, rerr := commands.ResultFromMessage(pub.take(t).msg)
			if rerr != nil || res.Status != commands.StatusInvalid || !errors.Is(res.Err(), tc.code) || res.CommandID != cmd.ID {
				t.Fatalf("answer %+v, %v; want invalid with code %s", res, rerr, tc.code)
			}
			if evs := stored(t, store, "t1"); len(evs) != 0 {
				t.Fatalf("the refused command stored %d events", len(evs))
			}
			ref := eventstore.Ref{Type: todo.AggregateType, ID: "t1"}
			if _, err := store.CommandResult(t.Context(), ref, cmd.ID); !errors.Is(err, eventstore.ErrCommandNotFound) {
				t.Fatalf("the refused command left a record of its id: %v", err)
			}
			if err := d.HandleMessage(signedMessage(t, cmd, commands.Signer{KeyID: "billing", Key: producerKey})); err != nil {
				t.Fatalf("the genuine command under the same id: %v", err)
			}
			if evs := stored(t, store, "t1"); len(evs) != 1 || evs[0].Metadata.ActorSource != eventstore.ActorSigned {
				t.Fatalf("after the genuine command: %d events (%+v), want 1 recorded as signed", len(evs), evs)
			}
		})
	}
}

// TestASignedCommandChangedAfterSigningIsRefused: a command signed with a
// producer key and then changed on the way (payload, expected version,
// reply topic, actor, IP, issue time, type of aggregate id kept) is
// refused with ErrBadSignature and stores nothing, even where unsigned
// commands are accepted: a signature that does not verify is never
// mistaken for no signature.
func TestASignedCommandChangedAfterSigningIsRefused(t *testing.T) {
	signer := commands.Signer{KeyID: "billing", Key: producerKey}
	one := int64(1)
	for _, tc := range []struct {
		name   string
		tamper func(body map[string]any, msg *message.Message)
	}{
		{"payload", func(b map[string]any, _ *message.Message) { b["payload"] = map[string]any{"title": "pay mallory"} }},
		{"expected version", func(b map[string]any, _ *message.Message) { b["expected_version"] = one }},
		{"actor", func(b map[string]any, _ *message.Message) { b["actor"] = "root" }},
		{"ip", func(b map[string]any, _ *message.Message) { b["ip"] = "127.0.0.1" }},
		{"issued at", func(b map[string]any, _ *message.Message) { b["issued_at"] = "2020-01-01T00:00:00Z" }},
		{"reply topic", func(_ map[string]any, m *message.Message) {
			m.Metadata.Set(commands.MetadataReplyTo, bus.Topics{}.RepliesFor("mallory"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &capture{}
			d, store := signedDispatcher(t, pub, false)
			msg := signedMessage(t, todoCommand(t, "t2"), signer)
			var body map[string]any
			if err := json.Unmarshal(msg.Payload, &body); err != nil {
				t.Fatal(err)
			}
			tc.tamper(body, msg)
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			msg.Payload = b
			err = d.HandleMessage(msg)
			if !eventstore.IsPermanent(err) || !errors.Is(err, commands.ErrBadSignature) {
				t.Fatalf("HandleMessage: %v; want a permanent error matching %s", err, commands.ErrBadSignature)
			}
			if res, rerr := commands.ResultFromMessage(pub.take(t).msg); rerr != nil || !errors.Is(res.Err(), commands.ErrBadSignature) {
				t.Fatalf("answer %+v, %v; want invalid with code %s", res, rerr, commands.ErrBadSignature)
			}
			if evs := stored(t, store, "t2"); len(evs) != 0 {
				t.Fatalf("the tampered command stored %d events: %+v", len(evs), evs)
			}
		})
	}
}

// TestAReservedIDTakesOnlyTheDeploymentKeysSignature: a command under a
// saga's id is refused with ErrReservedID (and ErrUnsignedReservedID)
// when unsigned or signed with a producer key, and nothing is recorded;
// signed with the deployment's key it runs, its actor recorded as signed.
func TestAReservedIDTakesOnlyTheDeploymentKeysSignature(t *testing.T) {
	deployment := []byte("0123456789abcdef0123456789abcdef-deployment")
	pub := &capture{}
	d, store := todoDispatcherWith(t, commands.DispatcherConfig{Replies: pub,
		Keys: commands.Keys{"billing": producerKey}, Signed: commands.SignedIDs{Key: deployment, Prefixes: []string{"transfer."}}})
	cmd := todoCommand(t, "t3")
	cmd.ID = "transfer.tr-1.credit"
	for name, s := range map[string]commands.Signer{"unsigned": {}, "producer key": {KeyID: "billing", Key: producerKey}} {
		err := d.HandleMessage(signedMessage(t, cmd, s))
		if !errors.Is(err, commands.ErrReservedID) || !errors.Is(err, commands.ErrUnsignedReservedID) || !eventstore.IsPermanent(err) {
			t.Fatalf("%s: %v; want a permanent ErrReservedID", name, err)
		}
		if res, _ := commands.ResultFromMessage(pub.take(t).msg); !errors.Is(res.Err(), commands.ErrReservedID) {
			t.Fatalf("%s: answer %+v", name, res)
		}
		if _, err := store.CommandResult(t.Context(), eventstore.Ref{Type: todo.AggregateType, ID: "t3"}, cmd.ID); !errors.Is(err, eventstore.ErrCommandNotFound) {
			t.Fatalf("%s: the refused command left a record: %v", name, err)
		}
	}
	if err := d.HandleMessage(signedMessage(t, cmd, commands.Signer{KeyID: commands.DeploymentKeyID, Key: deployment})); err != nil {
		t.Fatal(err)
	}
	if evs := stored(t, store, "t3"); len(evs) != 1 || evs[0].Metadata.ActorSource != eventstore.ActorSigned {
		t.Fatalf("the saga's signed command: %d events (%+v)", len(evs), evs)
	}
}
