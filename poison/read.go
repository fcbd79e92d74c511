package poison

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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
	cl, err := newClient(cfg.Brokers, cfg.Security)
	if err != nil {
		return nil, fmt.Errorf("poison: read %s: %w", cfg.Topic, err)
	}
	defer cl.Close()
	var out []Message
	err = scan(ctx, cl, cfg.Topic, cfg.Since, func(m Message) bool {
		if cfg.Match == nil || cfg.Match(m) {
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

// newClient returns a franz-go client on brokers that never creates
// topics.
func newClient(brokers []string, sec kafka.Security) (*kgo.Client, error) {
	opts, err := sec.KgoOpts()
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("eventpipe-poison")}, opts...)...)
}

// scan calls f with each record of topic from each partition's start (or
// the first at or after since) to its end as of the call, partition by
// partition in offset order, until f returns false.
func scan(ctx context.Context, cl *kgo.Client, topic string, since time.Time, f func(Message) bool) error {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	var starts kadm.ListedOffsets
	if since.IsZero() {
		starts, err = adm.ListStartOffsets(ctx, topic)
	} else {
		starts, err = adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topic)
	}
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	from := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition → end offset still to reach
	ends.Each(func(e kadm.ListedOffset) {
		s, ok := starts.Lookup(topic, e.Partition)
		if !ok || s.Offset < 0 || s.Offset >= e.Offset {
			return
		}
		from[e.Partition] = kgo.NewOffset().At(s.Offset)
		left[e.Partition] = e.Offset
	})
	if len(from) == 0 {
		return nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: from})
	defer cl.RemoveConsumePartitions(map[string][]int32{topic: partitionsOf(from)})
	for len(left) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		stop := false
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if stop || !ok || r.Offset >= end {
				return
			}
			if !f(fromRecord(r)) {
				stop = true
				return
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
		if stop {
			return nil
		}
	}
	return nil
}

func partitionsOf(m map[int32]kgo.Offset) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	return out
}

// fromRecord decodes r in watermill-kafka's format (kafka.Marshaler).
func fromRecord(r *kgo.Record) Message {
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
