package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
)

// SenderConfig configures a Sender.
type SenderConfig struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Publisher publishes commands (default: bus.NewPublisher on Brokers).
	Publisher message.Publisher
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
		return errors.New("commands: SenderConfig.Brokers is empty")
	}
	return nil
}

// Sender publishes commands and can wait for their results. It is safe
// for concurrent use.
type Sender struct {
	pub     message.Publisher
	ownPub  bool
	client  sarama.Client
	brokers []string
}

// NewSender connects to Kafka.
func NewSender(cfg SenderConfig) (*Sender, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sender{pub: cfg.Publisher, brokers: cfg.Brokers}
	if s.pub == nil {
		pub, err := bus.NewPublisher(bus.PublisherConfig{Brokers: cfg.Brokers, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		s.pub, s.ownPub = pub, true
	}
	sc := sarama.NewConfig()
	sc.Version = bus.KafkaVersion
	sc.ClientID = "eventpipe-sender"
	client, err := sarama.NewClient(cfg.Brokers, sc)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("commands: kafka client for %v: %w", cfg.Brokers, err)
	}
	s.client = client
	return s, nil
}

// Close releases the publisher (when the Sender made it) and the client.
func (s *Sender) Close() error {
	var errs []error
	if s.ownPub && s.pub != nil {
		errs = append(errs, s.pub.Close())
	}
	if s.client != nil {
		errs = append(errs, s.client.Close())
	}
	return errors.Join(errs...)
}

// Send validates and publishes cmd on its commands topic and returns once
// Kafka acknowledged it.
func (s *Sender) Send(ctx context.Context, cmd Command) error {
	msg, err := cmd.ToMessage()
	if err != nil {
		return err
	}
	msg.SetContext(ctx)
	if err := s.pub.Publish(cmd.Topic(), msg); err != nil {
		return fmt.Errorf("send command %s (%s): %w", cmd.ID, cmd.Type, err)
	}
	return nil
}

// SendAndWait sends cmd and waits for its Result on bus.RepliesTopic
// until ctx ends. It notes the end of the reply partition that the
// command id hashes to before sending, then reads that partition from
// there, so a reply cannot be missed and old replies are not scanned.
func (s *Sender) SendAndWait(ctx context.Context, cmd Command) (Result, error) {
	partition, offset, err := s.replyPosition(cmd.ID)
	if err != nil {
		return Result{}, err
	}
	if err := s.Send(ctx, cmd); err != nil {
		return Result{}, err
	}
	consumer, err := sarama.NewConsumerFromClient(s.client)
	if err != nil {
		return Result{}, fmt.Errorf("commands: reply consumer: %w", err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(bus.RepliesTopic, partition, offset)
	if err != nil {
		return Result{}, fmt.Errorf("commands: read replies partition %d: %w", partition, err)
	}
	defer pc.Close()
	for {
		select {
		case <-ctx.Done():
			return Result{}, fmt.Errorf("wait for the result of command %s: %w", cmd.ID, ctx.Err())
		case kerr := <-pc.Errors():
			return Result{}, fmt.Errorf("wait for the result of command %s: %w", cmd.ID, kerr)
		case km := <-pc.Messages():
			if string(km.Key) != cmd.ID {
				continue
			}
			msg, err := bus.Marshaler.Unmarshal(km)
			if err != nil {
				return Result{}, err
			}
			return ResultFromMessage(msg)
		}
	}
}

// replyPosition returns the replies partition the key hashes to (the
// publisher's hash partitioner) and its current end offset.
func (s *Sender) replyPosition(key string) (int32, int64, error) {
	parts, err := s.client.Partitions(bus.RepliesTopic)
	if err != nil {
		return 0, 0, fmt.Errorf("commands: partitions of %s: %w", bus.RepliesTopic, err)
	}
	p, err := sarama.NewHashPartitioner(bus.RepliesTopic).Partition(
		&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, int32(len(parts)))
	if err != nil {
		return 0, 0, err
	}
	off, err := s.client.GetOffset(bus.RepliesTopic, p, sarama.OffsetNewest)
	if err != nil {
		return 0, 0, fmt.Errorf("commands: end of %s/%d: %w", bus.RepliesTopic, p, err)
	}
	return p, off, nil
}
