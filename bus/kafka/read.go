package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Record is one Kafka record as this package's readers hand it out
// (ReadTopic, TopicReader, GroupConsumer): where it sits, its key, value,
// headers and timestamp. A record the Publisher wrote carries its
// Watermill message in watermill-kafka's format (see Marshaler): the
// payload as Value, the UUID and the metadata as headers.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
	// Timestamp is the record's timestamp (its producer's clock, or the
	// broker's for a topic with log-append time).
	Timestamp time.Time
}

// RecordHeader is one header of a Record.
type RecordHeader struct {
	Key   string
	Value []byte
}

// recordFromKgo returns r as a Record.
func recordFromKgo(r *kgo.Record) Record {
	rec := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	if len(r.Headers) > 0 {
		rec.Headers = make([]RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			rec.Headers[i] = RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return rec
}

// recordFromSarama returns m as a Record.
func recordFromSarama(m *sarama.ConsumerMessage) Record {
	rec := Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
	if len(m.Headers) > 0 {
		rec.Headers = make([]RecordHeader, 0, len(m.Headers))
		for _, h := range m.Headers {
			if h != nil {
				rec.Headers = append(rec.Headers, RecordHeader{Key: string(h.Key), Value: h.Value})
			}
		}
	}
	return rec
}

// newReadClient returns a franz-go client on cluster, connecting with its
// Security, that never creates topics; opts are added (what to consume).
func newReadClient(cluster Cluster, clientID string, opts ...kgo.Opt) (*kgo.Client, error) {
	if len(cluster.Brokers) == 0 {
		return nil, errors.New("Cluster.Brokers is empty")
	}
	secOpts, err := cluster.kgoOpts()
	if err != nil {
		return nil, err
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(cluster.Brokers...), kgo.ClientID(clientID)}, secOpts...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("client on %v: %w", cluster.Brokers, err)
	}
	return cl, nil
}

// poll waits for the next fetches of cl and returns their records, in
// partition and offset order within each fetch, and the first fetch error.
// When ctx ends before anything arrived, it returns no records and
// ctx.Err().
func poll(ctx context.Context, cl *kgo.Client) ([]Record, error) {
	fetches := cl.PollFetches(ctx)
	var out []Record
	fetches.EachRecord(func(r *kgo.Record) { out = append(out, recordFromKgo(r)) })
	var first error
	fetches.EachError(func(t string, p int32, err error) {
		if first != nil {
			return
		}
		switch {
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			first = err
		case errors.Is(err, kgo.ErrClientClosed):
			first = fmt.Errorf("reader closed: %w", err)
		default:
			first = fmt.Errorf("fetch %s/%d: %w", t, p, err)
		}
	})
	if len(out) == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, first
}

// ReadTopic calls f with each record of topic, from each partition's
// oldest record (or, when since is not zero, its first record written at
// or after since, by record timestamp) up to the partition's end as of
// the call, until f returns false. Records come in offset order within a
// partition; the partitions are read at once, so their records
// interleave. A topic that does not exist holds nothing: ReadTopic calls
// f for none and creates nothing. It reads outside any consumer group and
// commits nothing, with a client of its own on cluster (its Security:
// TLS, SASL), closed before it returns.
func ReadTopic(ctx context.Context, cluster Cluster, topic string, since time.Time, f func(Record) bool) error {
	wrap := func(what string, err error) error { return fmt.Errorf("kafka: read %s: %s: %w", topic, what, err) }
	if topic == "" {
		return errors.New("kafka: ReadTopic: empty topic name")
	}
	cl, err := newReadClient(cluster, "eventpipe-read")
	if err != nil {
		return wrap("client", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	if err != nil {
		return wrap("end offsets", cluster.Security.wrapConnErr("list offsets", cluster.Brokers, err))
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
		return wrap("start offsets", err)
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
	for len(left) > 0 {
		recs, err := poll(ctx, cl)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return wrap("fetch", err)
		}
		for _, r := range recs {
			end, ok := left[r.Partition]
			if !ok || r.Offset >= end {
				continue
			}
			if !f(r) {
				return nil
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		}
	}
	return nil
}

// TopicReaderConfig configures a TopicReader.
type TopicReaderConfig struct {
	// Cluster is where the topics are, and how to connect (TLS, SASL).
	// Its Brokers are required.
	Cluster Cluster
	// Topics are read, every partition of each; at least one is required.
	// A topic that does not exist yet is read once it does (the reader
	// does not create it).
	Topics []string
	// Start is where the reader begins on each partition: bus.StartEarliest
	// (the default; the zero Start means it), bus.StartLatest (only
	// records written after the reader found the partition) or
	// bus.StartAt(t) (the first record at or after t). bus.StartHistory
	// is refused.
	Start bus.Start
	// MaxWait is the longest a fetch waits for new records before the
	// broker answers it empty (default 500ms): it bounds how late a
	// record that arrives on an idle partition is seen.
	MaxWait time.Duration
	// ClientID names the client in broker logs (default
	// "eventpipe-reader").
	ClientID string
}

func (c *TopicReaderConfig) setDefaults() {
	c.Start = c.Start.Or(bus.StartEarliest)
	if c.MaxWait == 0 {
		c.MaxWait = 500 * time.Millisecond
	}
	if c.ClientID == "" {
		c.ClientID = "eventpipe-reader"
	}
}

// Validate reports the first invalid field.
func (c TopicReaderConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("kafka: TopicReaderConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(c.Cluster.Brokers) == 0:
		return bad("Cluster.Brokers", "is empty")
	case len(c.Topics) == 0:
		return bad("Topics", "is empty")
	case slices.Contains(c.Topics, ""):
		return bad("Topics", "has an empty topic name")
	case c.Start.IsHistory():
		return bad("Start", "is %s; want earliest, latest or a time", c.Start)
	case c.MaxWait < 0:
		return bad("MaxWait", "%s is negative", c.MaxWait)
	}
	if err := c.Cluster.Security.ValidateFor(c.Cluster.Brokers); err != nil {
		return fmt.Errorf("kafka: TopicReaderConfig.Cluster.Security: %w", err)
	}
	return nil
}

// TopicReader follows topics outside any consumer group: it reads every
// partition from its Start on and keeps reading records as they arrive,
// committing nothing. Tools and tests use it to watch what reaches a
// topic. Poll it from one goroutine; Close it when done.
type TopicReader struct {
	cl *kgo.Client
}

// NewTopicReader validates cfg, builds the reader's client with the
// cluster's Security and pings the brokers with it (within ctx), so that
// wrong settings (a CA, a password, TLS or SASL the listener does not
// speak) fail here, with an error naming the security in use, rather than
// leave Poll waiting. The reader starts fetching in the background at
// once; the records wait for Poll.
func NewTopicReader(ctx context.Context, cfg TopicReaderConfig) (*TopicReader, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	start := kgo.NewOffset().AtStart()
	switch at, ok := cfg.Start.Time(); {
	case cfg.Start.IsLatest():
		start = kgo.NewOffset().AtEnd()
	case ok:
		start = kgo.NewOffset().AfterMilli(at.UnixMilli())
	}
	cl, err := newReadClient(cfg.Cluster, cfg.ClientID, kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(start), kgo.FetchMaxWait(cfg.MaxWait))
	if err != nil {
		return nil, fmt.Errorf("kafka: reader of %v: %w", cfg.Topics, err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: reader of %v: %w", cfg.Topics, cfg.Cluster.Security.wrapConnErr("ping", cfg.Cluster.Brokers, err))
	}
	return &TopicReader{cl: cl}, nil
}

// Poll waits until records arrived or ctx ends, and returns the records
// that arrived: in offset order within a partition, partition after
// partition. When ctx ends first it returns none and ctx.Err(). A fetch
// that failed (the broker refused the reader, or a partition could not be
// read) is returned as an error naming it, with the records that did
// arrive; the reader keeps trying, so the caller may poll again.
func (r *TopicReader) Poll(ctx context.Context) ([]Record, error) {
	recs, err := poll(ctx, r.cl)
	if err != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("kafka: reader: %w", err)
	}
	return recs, err
}

// Close closes the reader's client; a Poll in progress returns.
func (r *TopicReader) Close() { r.cl.Close() }
