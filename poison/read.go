package poison

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
)

// ReadConfig configures Read.
type ReadConfig struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// Security is how the client connects (TLS, SASL).
	Security kafka.Security
	// Topic is the poison topic. Required.
	Topic string
	// Since, when not zero, reads only the records written at or after
	// it (by record timestamp).
	Since time.Time
	// Match, when set, keeps only the messages it returns true for.
	Match func(Message) bool
}

// Validate reports the first missing field as an
// *eventstore.ValidationError.
func (c ReadConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return &eventstore.ValidationError{Field: "Brokers", Reason: "no seed broker"}
	case c.Topic == "":
		return &eventstore.ValidationError{Field: "Topic", Reason: "empty"}
	}
	return c.Security.Validate()
}

// Read returns the records of cfg.Topic from each partition's start (or
// cfg.Since) up to its end as of the call, by partition and offset. A
// topic that does not exist holds nothing: Read returns none and creates
// nothing. It reads outside any consumer group and commits nothing.
func Read(ctx context.Context, cfg ReadConfig) ([]Message, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("poison: read: %w", err)
	}
	var out []Message
	err := kafka.ReadTopic(ctx, kafka.Cluster{Brokers: cfg.Brokers, Security: cfg.Security}, cfg.Topic, cfg.Since, func(r kafka.Record) bool {
		if m := fromRecord(r); cfg.Match == nil || cfg.Match(m) {
			out = append(out, m)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("poison: read %s: %w", cfg.Topic, err)
	}
	slices.SortFunc(out, func(a, b Message) int {
		if a.Partition != b.Partition {
			return cmp.Compare(a.Partition, b.Partition)
		}
		return cmp.Compare(a.Offset, b.Offset)
	})
	return out, nil
}

// fromRecord decodes r in watermill-kafka's format (kafka.Marshaler).
func fromRecord(r kafka.Record) Message {
	m := Message{Ref: Ref{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, Key: string(r.Key),
		Payload: r.Value, Timestamp: r.Timestamp, Metadata: message.Metadata{}}
	for _, h := range r.Headers {
		if h.Key == wmkafka.UUIDHeaderKey {
			m.UUID = string(h.Value)
			continue
		}
		m.Metadata.Set(h.Key, string(h.Value))
	}
	return m
}
