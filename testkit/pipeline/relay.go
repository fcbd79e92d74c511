package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/tracing"
)

// PoisonRecord is the payload of a message the in-process relay sends to
// the relay's poison topic (Topics.Poison(relay.DefaultPoisonGroup)) for
// a stored event or outbound record it cannot translate; the message
// carries the reason under relay.MetadataPoisonReason too.
type PoisonRecord struct {
	Reason string `json:"reason"`
	// Position is the append's place in the store's change feed.
	Position memstore.Position `json:"position"`
	// Event or Outbound is the record as stored.
	Event    *eventstore.Envelope       `json:"event,omitempty"`
	Outbound *eventstore.OutboundRecord `json:"outbound,omitempty"`
}

// feedRelay publishes the store's change feed onto the bus through
// relay.Translator, from the feed's start.
type feedRelay struct {
	store      *memstore.Store
	translator relay.Translator
	pub        message.Publisher
	poison     string // topic
	log        *slog.Logger

	mu      sync.Mutex
	relayed memstore.Position
	moved   chan struct{} // closed and replaced when relayed moves
}

func newFeedRelay(store *memstore.Store, tr relay.Translator, pub message.Publisher, log *slog.Logger) *feedRelay {
	return &feedRelay{store: store, translator: tr, pub: pub, poison: tr.Topics.Poison(relay.DefaultPoisonGroup), log: log,
		moved: make(chan struct{})}
}

// run relays every change until ctx ends (then it returns nil).
func (r *feedRelay) run(ctx context.Context) error {
	var pos memstore.Position
	for {
		changes, err := r.store.Changes(ctx, pos, 0)
		if err == nil && len(changes) == 0 {
			_, err = r.store.Wait(ctx, pos)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pipeline: relay: %w", err)
		}
		for _, c := range changes {
			if err := r.publish(ctx, c); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			pos = c.Position
			r.mu.Lock()
			r.relayed = pos
			close(r.moved)
			r.moved = make(chan struct{})
			r.mu.Unlock()
		}
	}
}

// publish publishes one append's events, then its outbound records,
// each topic's messages in one Publish call, in order, retrying until
// they are published or ctx ends. A message that carries a stored trace
// context is published in a producer span of its own, as the relay
// does.
func (r *feedRelay) publish(ctx context.Context, c memstore.Change) error {
	var topics []string
	out := map[string][]*message.Message{}
	add := func(o relay.Outgoing) {
		if _, seen := out[o.Topic]; !seen {
			topics = append(topics, o.Topic)
		}
		out[o.Topic] = append(out[o.Topic], o.Message)
	}
	for _, e := range c.Events {
		o, err := r.translator.Event(e)
		if err != nil {
			o = r.poisoned(c, err, PoisonRecord{Event: &e}, e.EventID, e.AggregateID)
		}
		add(o)
	}
	for _, rec := range c.Outbound {
		o, err := r.translator.Outbound(rec)
		if err != nil {
			o = r.poisoned(c, err, PoisonRecord{Outbound: &rec}, rec.ID, rec.AggregateID)
		}
		add(o)
	}
	var spans []trace.Span
	for topic, msgs := range out {
		for _, msg := range msgs {
			if parent := tracing.Extract(ctx, msg); trace.SpanContextFromContext(parent).IsValid() {
				_, span := tracing.StartProducer(parent, msg, "publish "+topic, topic)
				spans = append(spans, span)
			}
		}
	}
	send := func() error {
		var errs []error
		for _, topic := range topics {
			errs = append(errs, r.pub.Publish(topic, out[topic]...))
		}
		return errors.Join(errs...)
	}
	err := send()
	for delay := 10 * time.Millisecond; err != nil; delay = min(2*delay, time.Second) {
		r.log.Warn("pipeline: relay: publish failed; retrying", "position", c.Position, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			err = fmt.Errorf("pipeline: relay: publish change %d: %w (then %w)", c.Position, err, ctx.Err())
		case <-time.After(delay):
			err = send()
			continue
		}
		break
	}
	for _, span := range spans {
		tracing.RecordFailure(span, err)
		span.End()
	}
	return err
}

// poisoned is the poison-topic message of a record that failed to
// translate.
func (r *feedRelay) poisoned(c memstore.Change, reason error, p PoisonRecord, id, key string) relay.Outgoing {
	r.log.Error("pipeline: relay: record sent to the poison topic", "position", c.Position, "aggregate", c.Aggregate, "err", reason)
	p.Reason, p.Position = reason.Error(), c.Position
	body, err := json.Marshal(p)
	if err != nil { // an envelope that cannot be encoded: keep the reason
		body, _ = json.Marshal(PoisonRecord{Reason: p.Reason + "; encode the record: " + err.Error(), Position: c.Position})
	}
	msg := message.NewMessage(id, body)
	msg.Metadata.Set(bus.MetadataPartitionKey, key)
	msg.Metadata.Set(relay.MetadataPoisonReason, p.Reason)
	return relay.Outgoing{Topic: r.poison, Message: msg}
}

// wait blocks until the change at position pos was published or ctx
// ends.
func (r *feedRelay) wait(ctx context.Context, pos memstore.Position) error {
	for {
		r.mu.Lock()
		relayed, moved := r.relayed, r.moved
		r.mu.Unlock()
		if relayed >= pos {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pipeline: wait until change %d is relayed (at %d): %w", pos, relayed, ctx.Err())
		case <-moved:
		}
	}
}
