package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Bus is the pipeline's in-memory Pub/Sub (see the package
// documentation): each topic is one ordered log, kept in memory until
// the Pipeline is closed. Publish appends to a topic's log; each
// Subscribe reads its topic's log from the first message, one message at
// a time: it hands over the next only once the previous was acked, and a
// nacked message is handed over again (after RedeliveryPause) before any
// later one. A subscription ends, closing its channel, when its ctx ends
// or the bus is closed. It is safe for concurrent use.
type Bus interface {
	message.Publisher
	message.Subscriber
}

// RedeliveryPause is how long the bus waits before it hands a nacked
// message over again (Kafka's Watermill subscriber waits too, 100ms by
// default), so a consumer that keeps nacking does not spin.
const RedeliveryPause = 10 * time.Millisecond

// errBusClosed is returned by the bus's Publish and Subscribe once it is
// closed.
var errBusClosed = errors.New("pipeline: the bus is closed")

// memBus is the Bus of a Pipeline. Beside Publish and Subscribe it tells
// the Pipeline when every subscription acked every message of its topic
// (waitIdle) and which consumer groups subscribed to which topics
// (waitJoined), for Pipeline.Settle.
type memBus struct {
	mu      sync.Mutex
	topics  map[string]*topicLog
	joined  map[groupTopic]bool
	pending int           // Σ over the live subscriptions of the messages of their topic not acked yet
	version uint64        // one more at each Publish and Subscribe
	changed chan struct{} // closed and replaced when any of the above changes
	closed  bool
	closing chan struct{} // closed by Close
	running sync.WaitGroup
}

// topicLog is the log of one topic.
type topicLog struct {
	msgs []*message.Message
	grew chan struct{} // closed and replaced when msgs grows
	subs map[*subscription]struct{}
}

// subscription is one Subscribe's cursor in its topic's log.
type subscription struct {
	topic, group string
	log          *topicLog
	next         int // index in log.msgs of the first message not acked yet
}

// groupTopic is a consumer group's subscription to a topic.
type groupTopic struct{ group, topic string }

func newMemBus() *memBus {
	return &memBus{topics: map[string]*topicLog{}, joined: map[groupTopic]bool{}, changed: make(chan struct{}), closing: make(chan struct{})}
}

var _ Bus = (*memBus)(nil)

// signal wakes everyone waiting on b.changed. Call it with b.mu held.
func (b *memBus) signal() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// log returns topic's log, created when missing. Call it with b.mu held.
func (b *memBus) log(topic string) *topicLog {
	t := b.topics[topic]
	if t == nil {
		t = &topicLog{grew: make(chan struct{}), subs: map[*subscription]struct{}{}}
		b.topics[topic] = t
	}
	return t
}

// Publish appends copies of msgs to topic's log, in order. It does not
// wait for any subscriber. It fails once the bus is closed.
func (b *memBus) Publish(topic string, msgs ...*message.Message) error {
	copies := make([]*message.Message, len(msgs))
	for i, m := range msgs {
		copies[i] = m.Copy()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("publish on %s: %w", topic, errBusClosed)
	}
	if len(copies) == 0 {
		return nil
	}
	t := b.log(topic)
	t.msgs = append(t.msgs, copies...)
	b.pending += len(copies) * len(t.subs)
	b.version++
	close(t.grew)
	t.grew = make(chan struct{})
	b.signal()
	return nil
}

// Subscribe returns every message of topic, from the first, in order,
// one at a time (see Bus), until ctx ends or the bus is closed.
func (b *memBus) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	return b.subscribe(ctx, topic, "")
}

// subscribe is Subscribe for the consumer group group ("": none).
func (b *memBus) subscribe(ctx context.Context, topic, group string) (<-chan *message.Message, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("subscribe to %s: %w", topic, errBusClosed)
	}
	t := b.log(topic)
	s := &subscription{topic: topic, group: group, log: t}
	t.subs[s] = struct{}{}
	b.pending += len(t.msgs)
	b.version++
	if group != "" {
		b.joined[groupTopic{group, topic}] = true
	}
	b.running.Add(1)
	b.signal()
	b.mu.Unlock()
	out := make(chan *message.Message)
	go b.deliver(ctx, s, out)
	return out, nil
}

// deliver hands s's messages over on out, each once acked, until ctx
// ends or the bus closes; then it closes out.
func (b *memBus) deliver(ctx context.Context, s *subscription, out chan<- *message.Message) {
	defer b.running.Done()
	defer close(out)
	defer b.leave(s)
	for {
		b.mu.Lock()
		var msg *message.Message
		grew := s.log.grew
		if s.next < len(s.log.msgs) {
			msg = s.log.msgs[s.next]
		}
		b.mu.Unlock()
		if msg == nil {
			select {
			case <-grew:
				continue
			case <-ctx.Done():
				return
			case <-b.closing:
				return
			}
		}
		if !b.handOver(ctx, msg, out) {
			return
		}
		b.mu.Lock()
		s.next++
		b.pending--
		b.signal()
		b.mu.Unlock()
	}
}

// handOver sends a copy of msg on out until one is acked (true), a
// nacked copy sent again after RedeliveryPause; false when ctx ends or
// the bus closes first. As with Watermill's GoChannel, the copies'
// context is ctx's child, cancelled once msg is acked.
func (b *memBus) handOver(ctx context.Context, msg *message.Message, out chan<- *message.Message) bool {
	msgCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for {
		m := msg.Copy()
		m.SetContext(msgCtx)
		select {
		case out <- m:
		case <-ctx.Done():
			return false
		case <-b.closing:
			return false
		}
		select {
		case <-m.Acked():
			return true
		case <-m.Nacked():
		case <-ctx.Done():
			return false
		case <-b.closing:
			return false
		}
		pause := time.NewTimer(RedeliveryPause)
		select {
		case <-pause.C:
		case <-ctx.Done():
			pause.Stop()
			return false
		case <-b.closing:
			pause.Stop()
			return false
		}
	}
}

// leave drops the ended subscription s.
func (b *memBus) leave(s *subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(s.log.subs, s)
	b.pending -= len(s.log.msgs) - s.next
	b.signal()
}

// Close ends every subscription, waits until their channels are closed
// and drops every message. Publish and Subscribe fail afterwards. It
// returns nil, also when called again.
func (b *memBus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.closing)
	b.signal()
	b.mu.Unlock()
	b.running.Wait()
	b.mu.Lock()
	b.topics = map[string]*topicLog{}
	b.mu.Unlock()
	return nil
}

// subscriber is the Subscriber of the consumer group group: the
// pipeline hands one to each consumer (eventpipe's NewSubscriber).
func (b *memBus) subscriber(group string) message.Subscriber { return groupSubscriber{b, group} }

// groupSubscriber subscribes on the bus for its group. Its Close does
// nothing: the bus outlives every consumer and Pipeline.Close closes it.
type groupSubscriber struct {
	b     *memBus
	group string
}

func (g groupSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	return g.b.subscribe(ctx, topic, g.group)
}

// Close does nothing.
func (groupSubscriber) Close() error { return nil }

// waitJoined waits until each of want subscribed at least once, ctx ends
// or the bus closes.
func (b *memBus) waitJoined(ctx context.Context, want []groupTopic) error {
	for {
		b.mu.Lock()
		missing, closed, changed := b.missing(want), b.closed, b.changed
		b.mu.Unlock()
		switch {
		case closed:
			return errBusClosed
		case len(missing) == 0:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// missing returns those of want that never subscribed. Call it with b.mu
// held.
func (b *memBus) missing(want []groupTopic) []groupTopic {
	var out []groupTopic
	for _, gt := range want {
		if !b.joined[gt] {
			out = append(out, gt)
		}
	}
	return out
}

// waitIdle waits until every live subscription acked every message of
// its topic and returns the bus's version then, or ctx's error, or
// errBusClosed.
func (b *memBus) waitIdle(ctx context.Context) (uint64, error) {
	for {
		b.mu.Lock()
		pending, version, closed, changed := b.pending, b.version, b.closed, b.changed
		b.mu.Unlock()
		switch {
		case closed:
			return 0, errBusClosed
		case pending == 0:
			return version, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-changed:
		}
	}
}

// busy describes what keeps the bus from being idle: the groups of want
// that never subscribed and the subscriptions with messages not acked.
func (b *memBus) busy(want []groupTopic) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var parts []string
	for _, gt := range b.missing(want) {
		parts = append(parts, fmt.Sprintf("group %s never subscribed to %s", gt.group, gt.topic))
	}
	var subs []string
	for topic, t := range b.topics {
		for s := range t.subs {
			if n := len(t.msgs) - s.next; n > 0 {
				who := "a subscriber"
				if s.group != "" {
					who = "group " + s.group
				}
				subs = append(subs, fmt.Sprintf("%s has %d messages of %s not acked", who, n, topic))
			}
		}
	}
	sort.Strings(subs)
	parts = append(parts, subs...)
	if len(parts) == 0 {
		return "idle"
	}
	return strings.Join(parts, "; ")
}
