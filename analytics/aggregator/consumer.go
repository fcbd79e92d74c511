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

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics/analyticsbus"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/pause"
)

// Consumer is the aggregation consumer: a member of its Kafka consumer
// group on every analytics topic, keeping the sessions and the hourly
// and daily aggregations of the analytics table.
type Consumer struct {
	cfg     Config
	group   kafka.GroupConsumerConfig
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
	log := cfg.Logger.With("component", "analytics-aggregator")
	return &Consumer{
		cfg:        cfg,
		group:      cfg.groupConfig(log),
		table:      &table{client: cfg.Client, name: cfg.Table, sessionTTL: cfg.SessionTTL},
		metrics:    newMetrics(cfg.Registerer),
		log:        log.With("group", cfg.Kafka.ConsumerGroup),
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
	// The reader lists the analytics topics; the group member reads them.
	reader, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: c.cfg.Kafka.Brokers, Security: c.cfg.Kafka.Security})
	if err != nil {
		return fmt.Errorf("aggregator: connect to kafka: %w", err)
	}
	defer reader.Close()
	group, err := kafka.NewGroupConsumer(c.group)
	if err != nil {
		return fmt.Errorf("aggregator: join group %s: %w", c.cfg.Kafka.ConsumerGroup, err)
	}
	defer func() {
		if err := group.Close(); err != nil {
			c.log.Warn("leave consumer group", "err", err)
		}
	}()
	c.log.InfoContext(ctx, "aggregation consumer started", "topics", c.prefix+"*", "table", c.cfg.Table)
	for ctx.Err() == nil {
		topics, err := reader.TopicsWithPrefix(ctx, c.prefix)
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "list topics failed; retrying", "err", err)
		}
		if len(topics) == 0 {
			if pause.Sleep(ctx, c.cfg.DiscoveryInterval) != nil {
				break
			}
			continue
		}
		err = c.consume(ctx, reader, group, topics)
		if errors.Is(err, kafka.ErrGroupConsumerClosed) {
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
func (c *Consumer) consume(ctx context.Context, reader *kafka.OffsetReader, group *kafka.GroupConsumer, topics []string) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pause.Sleep(sctx, c.cfg.DiscoveryInterval) == nil {
			now, err := reader.TopicsWithPrefix(sctx, c.prefix)
			if err == nil && !slices.Equal(now, topics) {
				c.log.Info("analytics topics changed; rejoining", "topics", now)
				cancel()
			}
		}
	}()
	defer wg.Wait()
	for sctx.Err() == nil {
		if err := group.Consume(sctx, topics, c.consumeClaim); err != nil {
			return err
		}
	}
	return nil
}

// consumeClaim folds one partition in batches and marks each batch's
// offsets once it is written.
func (c *Consumer) consumeClaim(ctx context.Context, claim *kafka.Claim) error {
	topic, partition := claim.Topic(), claim.Partition()
	source := strings.TrimPrefix(topic, c.prefix)
	log := c.log.With("topic", topic, "partition", partition)
	for {
		batch, open := claim.Batch(ctx, c.cfg.BatchSize, c.cfg.BatchWait)
		if len(batch) > 0 {
			if err := c.handle(ctx, log, source, partition, batch); err != nil {
				return err // the session ended; nothing past the last mark is committed
			}
			claim.Mark(batch[len(batch)-1])
		}
		if !open || ctx.Err() != nil {
			return nil
		}
	}
}

// handle decodes and applies a batch, retrying failed writes with
// back-off until they succeed or ctx ends.
func (c *Consumer) handle(ctx context.Context, log *slog.Logger, source string, partition int32, batch []kafka.Record) error {
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
func decode(source string, m kafka.Record) (delivery, error) {
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
func (c *Consumer) poison(ctx context.Context, log *slog.Logger, m kafka.Record, reason error) error {
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
