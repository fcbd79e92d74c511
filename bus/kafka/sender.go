package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
)

// SenderConfig configures a Sender.
type SenderConfig struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Security is how the Sender's clients connect: TLS and SASL
	// (default: the zero Security, plain text without authentication).
	// The default Publisher uses it too.
	Security Security
	// Publisher publishes commands (default: NewPublisher on Brokers
	// with Security).
	Publisher message.Publisher
	// Topics is the topic namespace (default: the default namespace).
	Topics bus.Topics
	// Logger receives Watermill's logs (default slog's default).
	Logger watermill.LoggerAdapter
}

func (c *SenderConfig) setDefaults() {
	if c.Logger == nil {
		c.Logger = watermill.NewSlogLogger(nil)
	}
}

// Validate reports the first invalid field.
func (c SenderConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka: SenderConfig.Brokers is empty")
	}
	if err := c.Security.Validate(); err != nil {
		return fmt.Errorf("kafka: SenderConfig.Security: %w", err)
	}
	return nil
}

// Sender publishes commands and can wait for their results. It is safe
// for concurrent use.
type Sender struct {
	pub    message.Publisher
	ownPub bool
	client sarama.Client
	topics bus.Topics

	listenOnce     sync.Once
	listenStartErr error
	listenErr      chan error
	consumer       sarama.Consumer
	waiters        commands.Waiters
}

// NewSender connects to Kafka.
func NewSender(cfg SenderConfig) (*Sender, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sender{pub: cfg.Publisher, topics: cfg.Topics}
	if s.pub == nil {
		pub, err := NewPublisher(PublisherConfig{Brokers: cfg.Brokers, Security: cfg.Security, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		s.pub, s.ownPub = pub, true
	}
	sc := sarama.NewConfig()
	if err := cfg.Security.ApplySarama(sc); err != nil {
		s.Close()
		return nil, err
	}
	sc.Version = KafkaVersion
	sc.ClientID = "eventpipe-sender"
	sc.Consumer.MaxWaitTime = 50 * time.Millisecond
	client, err := sarama.NewClient(cfg.Brokers, sc)
	if err != nil {
		s.Close()
		return nil, cfg.Security.wrapConnErr("kafka client", cfg.Brokers, err)
	}
	s.client = client
	return s, nil
}

// Close releases the publisher (when the Sender made it) and the client.
func (s *Sender) Close() error {
	var errs []error
	if s.consumer != nil {
		errs = append(errs, s.consumer.Close())
	}
	if s.ownPub && s.pub != nil {
		errs = append(errs, s.pub.Close())
	}
	if s.client != nil {
		errs = append(errs, s.client.Close())
	}
	return errors.Join(errs...)
}

// Send validates and publishes cmd on its commands topic and returns once
// Kafka acknowledged it. It traces the publish as a span "send <command
// type>", a child of ctx's span, whose context the message carries in its
// metadata (package tracing).
func (s *Sender) Send(ctx context.Context, cmd commands.Command) (err error) {
	return commands.Publish(ctx, s.pub, s.topics, cmd)
}

// SendAndWait sends cmd and waits for its commands.Result on the replies topic
// until ctx ends. On first use the Sender starts reading every replies
// partition from its end and hands each result to the caller waiting for
// that command id; a caller registers before it publishes, so no reply can
// be missed, and old replies are never scanned.
func (s *Sender) SendAndWait(ctx context.Context, cmd commands.Command) (commands.Result, error) {
	if err := s.listen(); err != nil {
		return commands.Result{}, err
	}
	ch, done := s.waiters.Wait(cmd.ID)
	defer done()
	if err := s.Send(ctx, cmd); err != nil {
		return commands.Result{}, err
	}
	select {
	case res := <-ch:
		return res, nil
	case err := <-s.listenErr:
		return commands.Result{}, fmt.Errorf("wait for the result of command %s: %w", cmd.ID, err)
	case <-ctx.Done():
		return commands.Result{}, fmt.Errorf("wait for the result of command %s: %w", cmd.ID, ctx.Err())
	}
}

// listen starts the replies reader once.
func (s *Sender) listen() error {
	s.listenOnce.Do(func() {
		s.listenErr = make(chan error, 1)
		topic := s.topics.Replies()
		consumer, err := sarama.NewConsumerFromClient(s.client)
		if err != nil {
			s.listenStartErr = fmt.Errorf("kafka: reply consumer: %w", err)
			return
		}
		s.consumer = consumer
		parts, err := s.client.Partitions(topic)
		if err != nil {
			s.listenStartErr = fmt.Errorf("kafka: partitions of %s: %w", topic, err)
			return
		}
		for _, p := range parts {
			// ConsumePartition resolves OffsetNewest now, before any
			// command of this Sender is published.
			pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetNewest)
			if err != nil {
				s.listenStartErr = fmt.Errorf("kafka: read %s/%d: %w", topic, p, err)
				return
			}
			go s.deliver(pc)
		}
	})
	return s.listenStartErr
}

// deliver hands each reply of one partition to its waiter, if any.
func (s *Sender) deliver(pc sarama.PartitionConsumer) {
	for {
		select {
		case km, ok := <-pc.Messages():
			if !ok {
				return
			}
			if !s.waiters.Waiting(string(km.Key)) {
				continue
			}
			msg, err := Marshaler.Unmarshal(km)
			if err != nil {
				continue
			}
			if res, err := commands.ResultFromMessage(msg); err == nil {
				s.waiters.Deliver(res)
			}
		case kerr, ok := <-pc.Errors():
			if !ok {
				return
			}
			select {
			case s.listenErr <- kerr:
			default:
			}
		}
	}
}
