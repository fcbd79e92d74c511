package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/relay"
)

// Pipeline is the whole pipeline in one process, for tests and local
// experiments only (see the package documentation): the in-memory store,
// the in-memory bus, the command handlers, the relay of the store's
// change feed, the consumers of Config.Consumers and a Sender. Start it;
// Settle waits until it has done everything it was given; Close stops
// it.
type Pipeline struct {
	// Store is the event store the command handlers append to.
	Store *memstore.Store
	// Bus is the in-memory Pub/Sub every part publishes on and
	// subscribes to. Subscribe to any topic (Topics names them) to see
	// its messages, every one since the start, in order, the next once
	// the previous is acked: ack each (or end the subscription's ctx),
	// as Settle waits for every subscription. Do not Close it
	// (Pipeline.Close does).
	Bus Bus
	// WriteSide holds the command handlers (WriteSide.Handlers,
	// WriteSide.Dispatcher); its HTTP API is not served.
	WriteSide *eventpipe.WriteSide
	// Sender sends commands onto the bus and waits for their answers.
	Sender *Sender

	topics    bus.Topics
	bus       *memBus
	groups    []groupTopic // the parts' subscriptions, for Settle
	relay     *feedRelay
	consumers *eventpipe.Consumers
	cancel    context.CancelFunc
	done      chan struct{} // closed when every part stopped
	err       error         // the first part's failure, set before done closes
	closeOnce sync.Once
	closeErr  error
}

// Start builds the pipeline of cfg and starts its parts in the
// background; they run until ctx ends, one of them fails (Done, Err), or
// Close. A part that subscribes after a message was published still
// gets it (the bus is persistent), so a command sent at once is handled.
// Nothing it does is durable: for tests and local experiments, never
// production.
func Start(ctx context.Context, cfg Config) (*Pipeline, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ep := eventpipe.Endpoints{TopicPrefix: cfg.TopicPrefix}.Fill()
	if err := ep.Err(); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	store := cfg.Store
	if store == nil {
		var err error
		if store, err = memstore.New(memstore.Config{Schema: cfg.Catalog.Schema()}); err != nil {
			return nil, fmt.Errorf("pipeline: store: %w", err)
		}
	}
	// A subscriber gets every message published before it subscribed, so
	// no part misses what another published first.
	b := newMemBus()
	subscribers := func(group string) (message.Subscriber, error) { return b.subscriber(group), nil }
	p := &Pipeline{Store: store, Bus: b, bus: b, topics: topics, done: make(chan struct{})}
	var closers []func() error
	fail := func(err error) (*Pipeline, error) {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
		_ = b.Close()
		return nil, err
	}

	ws, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep, Catalog: cfg.Catalog, Logger: cfg.Logger}, Store: store,
		Publisher: b, NewSubscriber: subscribers, Middlewares: cfg.Middlewares, CommandKey: cfg.CommandKey})
	if err != nil {
		return fail(fmt.Errorf("pipeline: write side: %w", err))
	}
	closers = append(closers, ws.Close)
	p.WriteSide = ws
	for _, topic := range ws.Dispatcher.Topics() {
		p.groups = append(p.groups, groupTopic{eventpipe.CommandGroup(ws.Config().ConsumerGroup, topic), topic})
	}
	if len(cfg.Consumers) > 0 {
		cons, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: cfg.Catalog, Endpoints: ep, Logger: cfg.Logger}, Names: cfg.Consumers,
			DB: cfg.DB, Search: cfg.Search, NewSubscriber: subscribers, Publisher: b, NoKafka: true, Store: store,
			NoParking: cfg.NoParking, SnapshotEvery: cfg.SnapshotEvery, CommandKey: cfg.CommandKey})
		if err != nil {
			return fail(fmt.Errorf("pipeline: consumers: %w", err))
		}
		closers = append(closers, cons.Close)
		p.consumers = cons
		for _, name := range cfg.Consumers {
			c, _ := cfg.Catalog.Consumer(name)
			info := c.Describe(topics)
			for _, topic := range info.Topics {
				p.groups = append(p.groups, groupTopic{info.Group, topic})
			}
		}
	}
	p.relay = newFeedRelay(store, relay.Translator{Topics: topics, Upcasters: cfg.Catalog.Upcasters()}, b, cfg.Logger)

	runCtx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	if p.Sender, err = NewSender(runCtx, SenderConfig{Publisher: b, Subscriber: b, Topics: topics}); err != nil {
		cancel()
		return fail(err)
	}
	runs := []func(context.Context) error{ws.RunCommandHandlers, p.relay.run}
	if p.consumers != nil {
		runs = append(runs, p.consumers.Run)
	}
	var wg sync.WaitGroup
	var once sync.Once
	for _, run := range runs {
		wg.Go(func() {
			if err := run(runCtx); err != nil && runCtx.Err() == nil {
				once.Do(func() { p.err = err })
				cancel() // one part failed: stop the others
			}
		})
	}
	go func() {
		wg.Wait()
		cancel()
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i](); err != nil && p.err == nil {
				p.err = err
			}
		}
		close(p.done)
	}()
	return p, nil
}

// Topics is the topic namespace of the pipeline.
func (p *Pipeline) Topics() bus.Topics { return p.topics }

// WaitRelayed waits until every append committed to the store before
// the call was published on the bus (not yet consumed: consumers follow
// on their own, see Settle), or ctx ends.
func (p *Pipeline) WaitRelayed(ctx context.Context) error {
	return p.relay.wait(ctx, p.Store.Head())
}

// Settle waits until the pipeline has done everything it was given so
// far: every part subscribed (the command handlers and each consumer of
// Config.Consumers, on each of its topics), the relay published every
// append committed to the store (WaitRelayed), and every subscription of
// the bus, the consumers' and any of the caller's (Bus.Subscribe), acked
// every message published on its topic. What a consumer does may start
// new work (a saga sends a command, whose events are relayed; a handler
// publishes), so Settle loops until this holds twice in a row with
// nothing appended, published or subscribed in between. Work that a
// consumer does after it acked, off its handler, is not waited for.
//
// It returns nil then; an error wrapping ctx.Err(), which says what was
// still pending, when ctx ends first; and an error when the pipeline
// stops first (or was stopped). A subscription that is neither read and
// acked nor ended keeps it waiting until ctx ends.
func (p *Pipeline) Settle(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-p.done:
			cancel(errStopped)
		case <-ctx.Done():
		}
	}()
	if ctx.Err() != nil {
		return p.settleErr(ctx)
	}
	if err := p.bus.waitJoined(ctx, p.groups); err != nil {
		return p.settleErr(ctx)
	}
	var last [2]uint64
	for pass := 0; ; pass++ {
		head := p.Store.Head()
		if err := p.relay.wait(ctx, head); err != nil {
			return p.settleErr(ctx)
		}
		version, err := p.bus.waitIdle(ctx)
		if err != nil {
			return p.settleErr(ctx)
		}
		now := [2]uint64{uint64(head), version}
		if pass > 0 && now == last {
			return nil
		}
		last = now
	}
}

// errStopped is the cause of Settle's ctx when the pipeline stops.
var errStopped = errors.New("pipeline: stopped")

// settleErr is Settle's error once its wait failed under ctx.
func (p *Pipeline) settleErr(ctx context.Context) error {
	select {
	case <-p.done:
		if err := p.Err(); err != nil {
			return fmt.Errorf("pipeline: settle: the pipeline stopped: %w", err)
		}
		return errors.New("pipeline: settle: the pipeline stopped")
	default:
	}
	if err := ctx.Err(); err != nil && !errors.Is(context.Cause(ctx), errStopped) {
		return fmt.Errorf("pipeline: settle: %s: %w", p.bus.busy(p.groups), err)
	}
	return errors.New("pipeline: settle: the pipeline stopped")
}

// Done is closed once every part of the pipeline stopped: after Close,
// when Start's ctx ended, or when a part failed (Err says why).
func (p *Pipeline) Done() <-chan struct{} { return p.done }

// Err returns why the pipeline stopped on its own: the first part that
// failed, or nil. It is nil while the pipeline runs.
func (p *Pipeline) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Close stops every part, waits for them, releases the write side and
// the consumers and closes the bus. It returns Err: nil after a clean
// stop. Everything the pipeline held but Store is gone afterwards.
func (p *Pipeline) Close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		<-p.done
		p.closeErr = errors.Join(p.err, p.bus.Close())
	})
	return p.closeErr
}
