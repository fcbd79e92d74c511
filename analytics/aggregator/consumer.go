package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eventpipe/eventpipe/internal/pause"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics/analyticsbus"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Consumer is the aggregation consumer: a member of its Kafka consumer
// group on every analytics topic, keeping the sessions and the hourly
// and daily aggregations of the analytics table.
type Consumer struct {
	cfg     Config
	sarama  *sarama.Config
	table   *table
	metrics *metrics
	log     *slog.Logger
	prefix  string // topic prefix of the analytics topics
	// writeSlots bounds the item writes in flight across partitions.
	writeSlots chan struct{}
}

// New validates cfg and returns a Consumer; Run starts it.
func New(cfg Config) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc, err := cfg.Kafka.SaramaConfig()
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	sc.Consumer.Return.Errors = true
	sc.ChannelBufferSize = max(sc.ChannelBufferSize, cfg.BatchSize)
	return &Consumer{
		cfg:        cfg,
		sarama:     sc,
		table:      &table{client: cfg.Client, name: cfg.Table, sessionTTL: cfg.SessionTTL},
		metrics:    newMetrics(cfg.Registerer),
		log:        cfg.Logger.With("component", "analytics-aggregator", "group", cfg.Kafka.ConsumerGroup),
		prefix:     cfg.Topics.Prefix + bus.AnalyticsPrefix,
		writeSlots: make(chan struct{}, cfg.WriteConcurrency),
	}, nil
}

// Group is the consumer group.
func (c *Consumer) Group() string { return c.cfg.Kafka.ConsumerGroup }

// Run consumes until ctx ends. It looks for analytics topics every
// DiscoveryInterval and rejoins the group with the new set when one
// appears. It returns nil after ctx ends, or the error that stopped it.
func (c *Consumer) Run(ctx context.Context) error {
	client, err := sarama.NewClient(c.cfg.Kafka.Brokers, c.sarama)
	if err != nil {
		return fmt.Errorf("aggregator: connect to kafka: %w", err)
	}
	group, err := sarama.NewConsumerGroup(c.cfg.Kafka.Brokers, c.cfg.Kafka.ConsumerGroup, c.sarama)
	if err != nil {
		_ = client.Close()
		return fmt.Errorf("aggregator: join group %s: %w", c.cfg.Kafka.ConsumerGroup, err)
	}
	go func() {
		for err := range group.Errors() {
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("consumer group error", "err", err)
			}
		}
	}()
	defer func() {
		if err := group.Close(); err != nil {
			c.log.Warn("leave consumer group", "err", err)
		}
		_ = client.Close()
	}()
	c.log.InfoContext(ctx, "aggregation consumer started", "topics", c.prefix+"*", "table", c.cfg.Table)
	for ctx.Err() == nil {
		topics, err := c.topics(client)
		if err != nil {
			c.log.WarnContext(ctx, "list topics failed; retrying", "err", err)
		}
		if len(topics) == 0 {
			if pause.Sleep(ctx, c.cfg.DiscoveryInterval) != nil {
				break
			}
			continue
		}
		err = c.consume(ctx, client, group, topics)
		if errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return fmt.Errorf("aggregator: %w", err)
		}
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "group session ended with an error; rejoining", "err", err)
			_ = pause.Sleep(ctx, time.Second)
		}
	}
	c.log.Info("aggregation consumer stopped")
	return nil
}

// consume runs group sessions on topics until ctx ends or another
// analytics topic appears.
func (c *Consumer) consume(ctx context.Context, client sarama.Client, group sarama.ConsumerGroup, topics []string) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pause.Sleep(sctx, c.cfg.DiscoveryInterval) == nil {
			now, err := c.topics(client)
			if err == nil && !slices.Equal(now, topics) {
				c.log.Info("analytics topics changed; rejoining", "topics", now)
				cancel()
			}
		}
	}()
	defer wg.Wait()
	for sctx.Err() == nil {
		if err := group.Consume(sctx, topics, handler{c}); err != nil {
			return err
		}
	}
	return nil
}

// topics lists the analytics topics, sorted.
func (c *Consumer) topics(client sarama.Client) ([]string, error) {
	if err := client.RefreshMetadata(); err != nil {
		return nil, err
	}
	all, err := client.Topics()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range all {
		if strings.HasPrefix(t, c.prefix) && len(t) > len(c.prefix) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

// handler is the sarama.ConsumerGroupHandler of a Consumer.
type handler struct{ c *Consumer }

func (handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim folds one partition in batches and marks each batch's
// offsets once it is written.
func (h handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	c := h.c
	ctx := sess.Context()
	topic, partition := claim.Topic(), claim.Partition()
	source := strings.TrimPrefix(topic, c.prefix)
	log := c.log.With("topic", topic, "partition", partition)
	for {
		batch, open := c.collect(ctx, claim.Messages())
		if len(batch) > 0 {
			if err := c.handle(ctx, log, source, partition, batch); err != nil {
				return err // the session ended; nothing past the last mark is committed
			}
			sess.MarkMessage(batch[len(batch)-1], "")
		}
		if !open || ctx.Err() != nil {
			return nil
		}
	}
}

// collect waits for a message, then takes more until BatchSize or
// BatchWait; open is false once the claim's channel is closed.
func (c *Consumer) collect(ctx context.Context, msgs <-chan *sarama.ConsumerMessage) (batch []*sarama.ConsumerMessage, open bool) {
	select {
	case <-ctx.Done():
		return nil, true
	case m, ok := <-msgs:
		if !ok {
			return nil, false
		}
		batch = append(batch, m)
	}
	timer := time.NewTimer(c.cfg.BatchWait)
	defer timer.Stop()
	for len(batch) < c.cfg.BatchSize {
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch, false
			}
			batch = append(batch, m)
		case <-timer.C:
			return batch, true
		case <-ctx.Done():
			return batch, true
		}
	}
	return batch, true
}

// handle decodes and applies a batch, retrying failed writes with
// back-off until they succeed or ctx ends.
func (c *Consumer) handle(ctx context.Context, log *slog.Logger, source string, partition int32, batch []*sarama.ConsumerMessage) error {
	deliveries := make([]delivery, 0, len(batch))
	for _, m := range batch {
		d, err := decode(source, m)
		if err != nil {
			if err := c.poison(ctx, log, m, err); err != nil {
				return err
			}
			continue
		}
		deliveries = append(deliveries, d)
	}
	last := batch[len(batch)-1].Offset
	if len(deliveries) == 0 {
		return nil
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		out, err := c.applyBatch(ctx, source, partition, deliveries, last)
		c.metrics.observe(out, err)
		if err == nil {
			c.metrics.batchSeconds.Observe(time.Since(start).Seconds())
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := backoff(attempt)
		log.Warn("batch failed; retrying", "events", len(deliveries), "last_offset", last, "attempt", attempt, "retry_in", wait, "err", err)
		if err := pause.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// decode reads a message: an analytics event of the topic's source.
// Anything else is a *eventstore.DecodeError.
func decode(source string, m *sarama.ConsumerMessage) (delivery, error) {
	e, err := analyticsbus.Decode(m.Value)
	if err != nil {
		return delivery{}, err
	}
	what := "analytics event " + e.EventID
	if e.SourceID != source {
		return delivery{}, &eventstore.DecodeError{What: what, Field: "sourceId", Reason: fmt.Sprintf("%q differs from the topic's source %q", e.SourceID, source)}
	}
	if strings.Contains(e.SessionID, "#") {
		return delivery{}, &eventstore.DecodeError{What: what, Field: "sessionId", Reason: fmt.Sprintf("%q contains '#'", e.SessionID)}
	}
	return delivery{offset: m.Offset, event: e, id: ulid.MustParseStrict(e.EventID)}, nil
}

// Metadata of a poison message from the aggregation consumer.
const (
	MetadataPoisonReason = "reason"
	MetadataTopic        = "topic"
	MetadataPartition    = "partition"
	MetadataOffset       = "offset"
)

// poison sends a message that is not an analytics event to the poison
// topic (or logs it without one) so that it never blocks its partition.
func (c *Consumer) poison(ctx context.Context, log *slog.Logger, m *sarama.ConsumerMessage, reason error) error {
	c.metrics.poison.Inc()
	log.Error("message is not an analytics event; sent to the poison topic", "offset", m.Offset, "err", reason)
	if c.cfg.Poison == nil {
		return nil
	}
	id := fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)
	msg := message.NewMessage(id, m.Value)
	msg.Metadata.Set(bus.MetadataPartitionKey, string(m.Key))
	msg.Metadata.Set(MetadataPoisonReason, reason.Error())
	msg.Metadata.Set(MetadataTopic, m.Topic)
	msg.Metadata.Set(MetadataPartition, strconv.Itoa(int(m.Partition)))
	msg.Metadata.Set(MetadataOffset, strconv.FormatInt(m.Offset, 10))
	for attempt := 1; ; attempt++ {
		err := c.cfg.Poison.Publish(c.cfg.poisonTopic(), msg)
		if err == nil {
			return nil
		}
		log.Warn("publish to the poison topic failed; retrying", "err", err)
		if err := pause.Sleep(ctx, backoff(attempt)); err != nil {
			return err
		}
	}
}
