package pipeline

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// SenderConfig configures NewSender.
type SenderConfig struct {
	// Publisher publishes the commands. Required.
	Publisher message.Publisher
	// Subscriber reads the replies topic. Required. With a Pipeline's
	// Bus the Sender gets every reply, each its own copy.
	Subscriber message.Subscriber
	// Topics is the topic namespace (default: the default namespace).
	Topics bus.Topics
}

// Validate reports a missing field.
func (c SenderConfig) Validate() error {
	switch {
	case c.Publisher == nil:
		return fmt.Errorf("pipeline: SenderConfig: %w", &eventstore.ValidationError{Field: "Publisher", Reason: "is nil"})
	case c.Subscriber == nil:
		return fmt.Errorf("pipeline: SenderConfig: %w", &eventstore.ValidationError{Field: "Subscriber", Reason: "is nil"})
	}
	return nil
}

var _ commands.Sender = (*Sender)(nil)

// Sender publishes commands onto their commands topic and waits for
// their answers on the replies topic, as the Kafka sender of
// eventpipe.NewSender does, on any Watermill Pub/Sub whose subscriber
// gives it every reply (a Pipeline's Bus). It is safe for concurrent
// use.
type Sender struct {
	pub    message.Publisher
	topics bus.Topics

	waiters commands.Waiters
	stopped chan struct{} // closed when the replies end
}

// NewSender subscribes to the replies topic, until ctx ends, and returns
// the Sender.
func NewSender(ctx context.Context, cfg SenderConfig) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	replies, err := cfg.Subscriber.Subscribe(ctx, cfg.Topics.Replies())
	if err != nil {
		return nil, fmt.Errorf("pipeline: sender: subscribe to %s: %w", cfg.Topics.Replies(), err)
	}
	s := &Sender{pub: cfg.Publisher, topics: cfg.Topics, stopped: make(chan struct{})}
	go s.deliver(replies)
	return s, nil
}

// Send validates and publishes cmd on its commands topic, in a producer
// span "send <command type>" (package tracing), as the Kafka sender does.
func (s *Sender) Send(ctx context.Context, cmd commands.Command) (err error) {
	return commands.Publish(ctx, s.pub, s.topics, cmd)
}

// SendAndWait sends cmd and returns its answer, or an error when ctx ends
// or the replies stop (the Pipeline was closed) first. A command whose
// answer is already on the replies topic (its id was sent before) gets
// that answer.
func (s *Sender) SendAndWait(ctx context.Context, cmd commands.Command) (commands.Result, error) {
	ch, done := s.waiters.Wait(cmd.ID)
	defer done()
	if err := s.Send(ctx, cmd); err != nil {
		return commands.Result{}, err
	}
	select {
	case res := <-ch:
		return res, nil
	case <-s.stopped:
		return commands.Result{}, fmt.Errorf("wait for the result of command %s: the replies stopped", cmd.ID)
	case <-ctx.Done():
		return commands.Result{}, fmt.Errorf("wait for the result of command %s: %w", cmd.ID, ctx.Err())
	}
}

// deliver acks every reply and hands it to its waiter, if any.
func (s *Sender) deliver(replies <-chan *message.Message) {
	defer close(s.stopped)
	for msg := range replies {
		msg.Ack()
		res, err := commands.ResultFromMessage(msg)
		if err != nil {
			continue
		}
		s.waiters.Deliver(res)
	}
}
