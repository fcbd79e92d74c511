package kafka

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
)

// ErrPublisherClosed is returned by Publish after Close.
var ErrPublisherClosed = errors.New("kafka: publisher closed")

// Publisher is a Watermill message.Publisher on sarama's AsyncProducer.
// Publish hands every message of the call to the producer at once and
// returns after the broker has acknowledged all of them (acks=all,
// idempotent producer), so a batch costs about one round trip instead of
// one per message, and concurrent callers share the producer's batches.
// Messages published for one partition key (bus.MetadataPartitionKey) go
// to one partition and keep their order; messages without one go to a
// partition chosen at random for each, so they spread over the topic in
// no order (see Marshaler). It is safe for concurrent use.
//
// watermill-kafka v3.0.6 (the release on the module proxy) only has a
// synchronous publisher, about a tenth of the async producer's
// throughput here; this type keeps Watermill's interface so the Router and
// every caller stay standard.
type Publisher struct {
	producer sarama.AsyncProducer
	logger   watermill.LoggerAdapter

	mu     sync.RWMutex // guards closed against sends racing Close
	closed bool
	done   chan struct{} // closed when the result loops have drained
}

// batch tracks the acknowledgements one Publish call waits for.
type batch struct {
	mu      sync.Mutex
	pending int
	err     error
	done    chan struct{}
}

func (b *batch) ack(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil && b.err == nil {
		b.err = err
	}
	b.pending--
	if b.pending == 0 {
		close(b.done)
	}
}

// NewPublisher returns a Publisher: acks=all, idempotent (sarama's retries
// never duplicate a record), records keyed by bus.MetadataPartitionKey and
// partitioned by the hash of the key (a random partition for a message
// without one). A topic that does not exist is created by the broker on
// first use where it allows that (auto.create.topics.enable).
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc := sarama.NewConfig()
	if err := cfg.Security.ApplySarama(sc); err != nil {
		return nil, err
	}
	sc.Version = KafkaVersion
	sc.ClientID = cfg.ClientID
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Idempotent = true
	sc.Net.MaxOpenRequests = 1 // required by sarama for idempotence
	sc.Producer.Retry.Max = 10
	sc.Producer.Retry.Backoff = 250 * time.Millisecond
	sc.Producer.Return.Successes = true
	sc.Producer.Return.Errors = true
	sc.Producer.Partitioner = newPartitioner
	sc.Metadata.AllowAutoTopicCreation = true
	producer, err := sarama.NewAsyncProducer(cfg.Brokers, sc)
	if err != nil {
		return nil, cfg.Security.wrapConnErr("kafka producer", cfg.Brokers, err)
	}
	p := &Publisher{producer: producer, logger: cfg.Logger, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m := range producer.Successes() {
			m.Metadata.(*record).batch.ack(nil)
		}
	}()
	go func() {
		defer wg.Done()
		for e := range producer.Errors() {
			e.Msg.Metadata.(*record).batch.ack(fmt.Errorf("kafka: publish to %s: %w", e.Msg.Topic, e.Err))
		}
	}()
	go func() { wg.Wait(); close(p.done) }()
	return p, nil
}

// Publish sends msgs to topic and blocks until the broker has acknowledged
// every one. The first failure is returned after all have settled; a
// caller that retries may then publish some messages twice, which
// consumers tolerate (delivery is at least once).
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	records := make([]*sarama.ProducerMessage, len(msgs))
	b := &batch{pending: len(msgs), done: make(chan struct{})}
	for i, msg := range msgs {
		rec, err := Marshaler.Marshal(topic, msg)
		if err != nil {
			return fmt.Errorf("kafka: marshal message %s for %s: %w", msg.UUID, topic, err)
		}
		meta := &record{batch: b, partition: -1}
		if p := msg.Metadata.Get(bus.MetadataPartition); p != "" {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil || n < 0 {
				return fmt.Errorf("kafka: message %s for %s: %s %q is not a partition number", msg.UUID, topic, bus.MetadataPartition, p)
			}
			meta.partition = int32(n)
		}
		rec.Metadata = meta
		records[i] = rec
	}
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return ErrPublisherClosed
	}
	for _, rec := range records {
		p.producer.Input() <- rec
	}
	p.mu.RUnlock()
	<-b.done
	return b.err
}

// record is what the Publisher attaches to each record it hands the
// producer: the Publish call waiting for it, and the partition the
// message asked for (bus.MetadataPartition; -1 for the key's).
type record struct {
	batch     *batch
	partition int32
}

// partitioner puts a record on the partition its message asked for, and
// every other record where sarama's hash partitioner does (by key; at
// random without one).
type partitioner struct{ hash sarama.Partitioner }

func newPartitioner(topic string) sarama.Partitioner {
	return partitioner{hash: sarama.NewHashPartitioner(topic)}
}

func (p partitioner) Partition(m *sarama.ProducerMessage, n int32) (int32, error) {
	if r, ok := m.Metadata.(*record); ok && r.partition >= 0 {
		if r.partition >= n {
			return -1, fmt.Errorf("kafka: %s has %d partitions, the message asked for partition %d", m.Topic, n, r.partition)
		}
		return r.partition, nil
	}
	return p.hash.Partition(m, n)
}

// RequiresConsistency is true: a key's records must keep their
// partition while the producer retries.
func (p partitioner) RequiresConsistency() bool { return true }

// Close waits for messages in flight, then releases the producer.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.producer.AsyncClose()
	<-p.done
	return nil
}
