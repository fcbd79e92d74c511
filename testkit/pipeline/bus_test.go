package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// next receives the next message of ch or fails the test.
func next(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("the subscription ended")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
	}
	return nil
}

// quiet fails the test when ch hands over a message within d.
func quiet(t *testing.T, ch <-chan *message.Message, d time.Duration) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("message %s handed over before the previous one was acked", m.UUID)
	case <-time.After(d):
	}
}

func TestTheBusHandsOverATopicInOrderOneAtATimeAndANackedMessageAgainFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newMemBus()
	defer b.Close()
	for i := range 3 {
		if err := b.Publish("t", message.NewMessage(fmt.Sprint("m", i), []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	// Subscribed late, it gets every message from the first.
	ch, err := b.Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	m := next(t, ch)
	if m.UUID != "m0" {
		t.Fatalf("first message %s, want m0", m.UUID)
	}
	quiet(t, ch, 20*time.Millisecond)
	m.Nack()
	again := next(t, ch)
	if again.UUID != "m0" || again == m || again.Payload[0] != 0 {
		t.Fatalf("after a nack: %s (same copy: %v), want a new copy of m0", again.UUID, again == m)
	}
	if again.Context().Err() != nil {
		t.Fatal("the message's context is done")
	}
	again.Ack()
	for _, want := range []string{"m1", "m2"} {
		if m := next(t, ch); m.UUID != want {
			t.Fatalf("got %s, want %s", m.UUID, want)
		} else {
			m.Ack()
		}
	}
	if _, err := b.waitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	// A message published later, from a changed original, is the one
	// published.
	orig := message.NewMessage("m3", []byte("before"))
	if err := b.Publish("t", orig); err != nil {
		t.Fatal(err)
	}
	orig.Payload = []byte("after")
	if m := next(t, ch); m.UUID != "m3" || string(m.Payload) != "before" {
		t.Fatalf("got %s %q, want m3 as published", m.UUID, m.Payload)
	}
	// Not idle while m3 is not acked; the subscription's end counts as
	// done.
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	if _, err := b.waitIdle(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitIdle with m3 held: %v, want a timeout", err)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("the subscription did not end with its ctx")
	}
	if _, err := b.waitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestTheBusRefusesPublishAndSubscribeOnceClosedAndEndsItsSubscriptions(t *testing.T) {
	b := newMemBus()
	ch, err := b.subscriber("g").Subscribe(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.waitJoined(context.Background(), []groupTopic{{"g", "t"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; ok {
		t.Fatal("a message after Close")
	}
	if err := b.Publish("t", message.NewMessage("m", nil)); !errors.Is(err, errBusClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if _, err := b.Subscribe(context.Background(), "t"); !errors.Is(err, errBusClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
}
