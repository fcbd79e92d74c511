package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventpipe/eventpipe/eventstore"
)

// ErrGroupConsumerClosed is returned (wrapped) by GroupConsumer.Consume
// after Close.
var ErrGroupConsumerClosed = sarama.ErrClosedConsumerGroup

// defaultReadAhead is sarama's channel buffer: records fetched ahead of
// the handler per partition.
const defaultReadAhead = 256

// GroupConsumerConfig configures a GroupConsumer.
type GroupConsumerConfig struct {
	// Subscriber is the membership, as for NewSubscriber: Brokers,
	// Security, ConsumerGroup (required), ClientID, InitialOffset and the
	// group's timeouts, with their defaults. Its NackResendSleep,
	// ReconnectRetrySleep, CloseTimeout and Logger are not used.
	Subscriber SubscriberConfig
	// ReadAhead is how many records of each claimed partition are fetched
	// ahead of the handler, at least (default and minimum 256). A handler
	// that takes batches of n records wants n.
	ReadAhead int
	// Logger receives the errors the group meets between the handler's
	// calls (default slog.Default()).
	Logger *slog.Logger
}

func (c *GroupConsumerConfig) setDefaults() {
	c.Subscriber.setDefaults()
	c.ReadAhead = max(c.ReadAhead, defaultReadAhead)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field; zero fields count as their
// defaults.
func (c GroupConsumerConfig) Validate() error {
	_, err := c.saramaConfig()
	if err != nil && !errors.As(err, new(*eventstore.ValidationError)) {
		// sarama's own check of the member's configuration
		return fmt.Errorf("kafka: GroupConsumerConfig: %w", &eventstore.ValidationError{Field: "Subscriber", Reason: err.Error()})
	}
	return err
}

// saramaConfig fills a copy of c's defaults, validates it and returns the
// sarama configuration of the member.
func (c GroupConsumerConfig) saramaConfig() (*sarama.Config, error) {
	c.setDefaults()
	sc, err := c.Subscriber.SaramaConfig()
	if err != nil {
		return nil, err
	}
	sc.Consumer.Return.Errors = true
	sc.ChannelBufferSize = c.ReadAhead
	return sc, nil
}

// GroupConsumer is a consumer group member for consumers that work on a
// partition's records themselves, in batches, and decide which offsets to
// commit (as analytics/aggregator does), rather than on Watermill
// messages one at a time (Subscriber). Each Consume call is one group
// session: every partition the member is assigned goes to a ClaimHandler,
// which takes its records in offset order and marks the last one it is
// done with (Claim.Mark); sarama commits the marked offsets about once a
// second and when the session ends. Delivery is at least once: what was
// not marked is read again by the partition's next owner. It connects
// with the Subscriber's Security (TLS, SASL). Close it when done.
type GroupConsumer struct {
	cfg   GroupConsumerConfig
	group sarama.ConsumerGroup
	errs  sync.WaitGroup
}

// NewGroupConsumer validates cfg and connects the member's client; the
// member joins its group on Consume.
func NewGroupConsumer(cfg GroupConsumerConfig) (*GroupConsumer, error) {
	cfg.setDefaults()
	sc, err := cfg.saramaConfig()
	if err != nil {
		return nil, err
	}
	sub := cfg.Subscriber
	group, err := sarama.NewConsumerGroup(sub.Brokers, sub.ConsumerGroup, sc)
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer group %s: %w", sub.ConsumerGroup, sub.Security.wrapConnErr("client", sub.Brokers, err))
	}
	g := &GroupConsumer{cfg: cfg, group: group}
	g.errs.Go(func() {
		for err := range group.Errors() {
			if !errors.Is(err, context.Canceled) {
				cfg.Logger.Warn("consumer group error", "group", sub.ConsumerGroup, "err", err)
			}
		}
	})
	return g, nil
}

// Group is the consumer group.
func (g *GroupConsumer) Group() string { return g.cfg.Subscriber.ConsumerGroup }

// ClaimHandler works on one partition the member was assigned in a group
// session, until its claim ends: Claim.Batch reports it (the session ends
// at a rebalance, or when Consume's context ends), and so does ctx, the
// session's context. Handlers of the session's partitions run at once,
// each in its goroutine. An error ends the session; nothing past the
// claim's last Mark is committed.
type ClaimHandler func(ctx context.Context, claim *Claim) error

// Consume joins the group on topics and runs one group session: handle
// for each partition assigned, until ctx ends or a rebalance (a member
// came or left, a topic grew) ends the session; it returns then, and the
// caller calls it again to rejoin (with the same or other topics). It
// returns nil for a session that ended normally, the handlers' first
// error, or an error wrapping ErrGroupConsumerClosed after Close.
func (g *GroupConsumer) Consume(ctx context.Context, topics []string, handle ClaimHandler) error {
	if err := g.group.Consume(ctx, topics, claimHandler{handle}); err != nil {
		return fmt.Errorf("kafka: consumer group %s on %v: %w", g.cfg.Subscriber.ConsumerGroup, topics, err)
	}
	return nil
}

// Close leaves the group (committing what was marked) and closes the
// member's client.
func (g *GroupConsumer) Close() error {
	err := g.group.Close()
	g.errs.Wait()
	if err != nil {
		return fmt.Errorf("kafka: close consumer group %s: %w", g.cfg.Subscriber.ConsumerGroup, err)
	}
	return nil
}

// claimHandler is the sarama.ConsumerGroupHandler of a ClaimHandler.
type claimHandler struct{ handle ClaimHandler }

func (claimHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (claimHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h claimHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	return h.handle(sess.Context(), &Claim{sess: sess, claim: claim})
}

// Claim is one partition assigned to a GroupConsumer's member for one
// group session. Use it from its ClaimHandler's goroutine only.
type Claim struct {
	sess  sarama.ConsumerGroupSession
	claim sarama.ConsumerGroupClaim
}

// Topic is the claimed partition's topic.
func (c *Claim) Topic() string { return c.claim.Topic() }

// Partition is the claimed partition.
func (c *Claim) Partition() int32 { return c.claim.Partition() }

// Batch waits for the partition's next record, then takes the records
// that follow until it has max of them or wait has passed since the first
// arrived, and returns them in offset order. open is false once the claim
// has ended (the session is over): batch then holds what was left, maybe
// nothing. When ctx ends, Batch returns at once what it has (maybe
// nothing) with open true. max must be positive.
func (c *Claim) Batch(ctx context.Context, max int, wait time.Duration) (batch []Record, open bool) {
	msgs := c.claim.Messages()
	select {
	case <-ctx.Done():
		return nil, true
	case m, ok := <-msgs:
		if !ok {
			return nil, false
		}
		batch = append(batch, recordFromSarama(m))
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for len(batch) < max {
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch, false
			}
			batch = append(batch, recordFromSarama(m))
		case <-timer.C:
			return batch, true
		case <-ctx.Done():
			return batch, true
		}
	}
	return batch, true
}

// Mark records that the member is done with r and every record before it
// on the partition: the group's committed offset becomes r.Offset+1 at
// the next commit (about once a second, and when the session ends). r
// must be a record of this claim.
func (c *Claim) Mark(r Record) {
	c.sess.MarkOffset(r.Topic, r.Partition, r.Offset+1, "")
}
