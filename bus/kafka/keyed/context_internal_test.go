package keyed

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// done reports whether ctx ends within integration.HangAfter.
func done(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(integration.HangAfter()):
		return false
	}
}

// TestMessageContextEndsOnAckNackAndRevoke: a message's context lives
// while the message is handed out and ends once it is acked or nacked (as
// Watermill expects); the redelivery after a nack carries a live context
// with the same partition and offset; an unacked message's context ends
// when its partition is revoked; the partition's other messages are not
// affected by an ack.
func TestMessageContextEndsOnAckNackAndRevoke(t *testing.T) {
	u := runPartition(t, Config{NackResendSleep: 20 * time.Millisecond, RevokeTimeout: 200 * time.Millisecond})
	u.claim.records <- record(0, "a")
	u.claim.records <- record(1, "b")
	u.claim.records <- record(2, "c")
	byID := map[string]*message.Message{}
	for range 3 {
		m := u.receive(t)
		byID[m.UUID] = m
	}
	a, b, c := byID["a@0"], byID["b@1"], byID["c@2"]
	if a == nil || b == nil || c == nil {
		t.Fatalf("handed out %v, want a@0, b@1 and c@2", byID)
	}
	for id, m := range byID {
		if err := m.Context().Err(); err != nil {
			t.Fatalf("the context of %s ended while it was handed out: %v", id, err)
		}
	}

	a.Ack()
	if !done(a.Context()) {
		t.Fatal("the context of an acked message was not cancelled")
	}
	if b.Context().Err() != nil || c.Context().Err() != nil {
		t.Fatal("acking one message ended the context of another")
	}

	b.Nack()
	if !done(b.Context()) {
		t.Fatal("the context of a nacked message was not cancelled")
	}
	again := u.receive(t)
	if again.UUID != "b@1" {
		t.Fatalf("got %s after the nack of b@1", again.UUID)
	}
	if err := again.Context().Err(); err != nil {
		t.Fatalf("the redelivered message's context has ended: %v", err)
	}
	if p, ok := MessagePartitionFromCtx(again.Context()); !ok || p != 0 {
		t.Errorf("redelivered message: partition %d (%v) in its context, want 0", p, ok)
	}
	if o, ok := MessagePartitionOffsetFromCtx(again.Context()); !ok || o != 1 {
		t.Errorf("redelivered message: offset %d (%v) in its context, want 1", o, ok)
	}
	again.Ack()
	if !done(again.Context()) {
		t.Fatal("the context of the acked redelivery was not cancelled")
	}

	u.revoke()
	if err := u.wait(); err != nil {
		t.Fatal(err)
	}
	if c.Context().Err() == nil {
		t.Error("the context of a message abandoned by the revoke was not cancelled")
	}
}
