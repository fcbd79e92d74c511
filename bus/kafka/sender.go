package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
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
	// ReplyPartition is the partition of the replies topic the Sender
	// reads, and asks its commands to be answered on
	// (commands.MetadataReplyPartition). Default: one picked at random
	// on first use, so senders spread over the partitions and each reads
	// about 1/partitions of all answers. It must be a partition the
	// replies topic has.
	ReplyPartition *int32
	// Signer, when it has a key (a producer key the command handlers
	// hold: commands.DispatcherConfig.Keys), signs every command sent, so
	// the handlers record its actor as verified (and accept it where
	// signatures are required); SendAndWait then takes only the answer
	// signed for the command it sent (commands.VerifyResult) and ignores
	// any other reply with its id. Zero: commands go unsigned and their
	// actor is recorded as claimed.
	Signer commands.Signer
	// Sealer seals the personal fields of every command's payload before
	// it is signed and published (commands.Seal; eventpipe.NewSender
	// passes the catalogue's privacy.Sealer). Nil: payloads travel as
	// built.
	Sealer eventstore.CommandSealer
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
		return fmt.Errorf("kafka: SenderConfig: %w", &eventstore.ValidationError{Field: "Brokers", Reason: "is empty"})
	}
	if err := c.Security.ValidateFor(c.Brokers); err != nil {
		return fmt.Errorf("kafka: SenderConfig.Security: %w", err)
	}
	if c.ReplyPartition != nil && *c.ReplyPartition < 0 {
		return fmt.Errorf("kafka: SenderConfig: %w", &eventstore.ValidationError{Field: "ReplyPartition", Reason: fmt.Sprintf("%d is negative", *c.ReplyPartition)})
	}
	if err := c.Signer.Validate(); err != nil {
		return fmt.Errorf("kafka: SenderConfig: %w", err)
	}
	return nil
}

var _ commands.Sender = (*Sender)(nil)

// Sender publishes commands and can wait for their results. It is safe
// for concurrent use.
type Sender struct {
	pub    message.Publisher
	ownPub bool
	client sarama.Client
	topics bus.Topics
	want   *int32 // SenderConfig.ReplyPartition
	signer commands.Signer
	sealer eventstore.CommandSealer

	listenOnce     sync.Once
	listenStartErr error
	listenErr      chan error
	consumer       sarama.Consumer
	partition      int32 // the replies partition read, once listening
	waiters        commands.Waiters
}

// NewSender connects to Kafka.
func NewSender(cfg SenderConfig) (*Sender, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sender{pub: cfg.Publisher, topics: cfg.Topics, want: cfg.ReplyPartition, signer: cfg.Signer, sealer: cfg.Sealer}
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
	// A fetch waits up to 500 ms for an answer (Kafka's own default,
	// fetch.max.wait.ms) and returns as soon as one arrives: an idle
	// sender costs the broker two requests a second, not twenty, which
	// with 50 senders was a third of SendAndWait's p99.
	sc.Consumer.MaxWaitTime = 500 * time.Millisecond
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
// With a Sealer, its payload's personal fields are sealed first; with a
// Signer, the command is signed (SenderConfig.Signer).
func (s *Sender) Send(ctx context.Context, cmd commands.Command) (err error) {
	if cmd, err = commands.Seal(ctx, s.sealer, cmd, s.signer.Enabled()); err != nil {
		return err
	}
	_, err = s.publish(ctx, cmd, nil)
	return err
}

// publish publishes cmd with md, signed when the Sender signs, and
// returns the signature ("" unsigned).
func (s *Sender) publish(ctx context.Context, cmd commands.Command, md message.Metadata) (string, error) {
	if !s.signer.Enabled() {
		return "", commands.PublishWithMetadata(ctx, s.pub, s.topics, cmd, md)
	}
	if md == nil {
		md = message.Metadata{}
	}
	msg, err := cmd.ToMessage()
	if err != nil {
		return "", err
	}
	for k, v := range md {
		msg.Metadata.Set(k, v)
	}
	sig := s.signer.SignMessage(msg, cmd)
	md.Set(commands.MetadataKeyID, msg.Metadata.Get(commands.MetadataKeyID))
	md.Set(commands.MetadataSignature, sig)
	return sig, commands.PublishWithMetadata(ctx, s.pub, s.topics, cmd, md)
}

// SendAndWait sends cmd and waits for its commands.Result on the replies topic
// until ctx ends. On first use the Sender starts reading its one replies
// partition (SenderConfig.ReplyPartition) from its end; each command it
// sends asks to be answered on that partition, and each result read is
// handed to the caller waiting for that command id (with a Signer, only
// a result signed as the answer to the command sent: another reply with
// the same id is ignored). A caller registers
// before it publishes, so no reply can be missed, old replies are never
// scanned, and the answers to other senders' commands are (mostly) never
// read: a sender's reading grows with its own commands, not with all.
func (s *Sender) SendAndWait(ctx context.Context, cmd commands.Command) (commands.Result, error) {
	if err := s.listen(); err != nil {
		return commands.Result{}, err
	}
	cmd, err := commands.Seal(ctx, s.sealer, cmd, s.signer.Enabled())
	if err != nil {
		return commands.Result{}, err
	}
	var accept func(commands.Result) bool
	var sig string
	if s.signer.Enabled() {
		// The reply is taken only when signed for this very command: the
		// signature is known before the command is published.
		msg, err := cmd.ToMessage()
		if err != nil {
			return commands.Result{}, err
		}
		sig = s.signer.SignMessage(msg, cmd)
		accept = func(res commands.Result) bool { return commands.VerifyResult(s.signer.Key, sig, res) }
	}
	ch, done := s.waiters.WaitFor(cmd.ID, accept)
	defer done()
	md := message.Metadata{commands.MetadataReplyPartition: strconv.FormatInt(int64(s.partition), 10)}
	if _, err := s.publish(ctx, cmd, md); err != nil {
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
		switch {
		case len(parts) == 0:
			s.listenStartErr = fmt.Errorf("kafka: %s has no partitions", topic)
			return
		case s.want == nil:
			s.partition = parts[rand.IntN(len(parts))]
		case !slices.Contains(parts, *s.want):
			s.listenStartErr = fmt.Errorf("kafka: SenderConfig.ReplyPartition %d: %s has partitions 0–%d", *s.want, topic, len(parts)-1)
			return
		default:
			s.partition = *s.want
		}
		// ConsumePartition resolves OffsetNewest now, before any command
		// of this Sender is published.
		pc, err := consumer.ConsumePartition(topic, s.partition, sarama.OffsetNewest)
		if err != nil {
			s.listenStartErr = fmt.Errorf("kafka: read %s/%d: %w", topic, s.partition, err)
			return
		}
		go s.deliver(pc)
	})
	return s.listenStartErr
}

// ReplyPartition starts the replies reader if SendAndWait has not, and
// returns the replies partition the Sender reads.
func (s *Sender) ReplyPartition() (int32, error) {
	if err := s.listen(); err != nil {
		return -1, err
	}
	return s.partition, nil
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
