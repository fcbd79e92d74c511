// Package pipeline runs the whole eventpipe pipeline in one process,
// without DynamoDB, Kafka or any other service, for tests and local
// experiments. It is never for production: nothing is durable, every
// event and message lives in the process's memory and is gone when it
// exits (or the Pipeline is closed).
//
// Start wires, in one process:
//
//   - an in-memory event store (eventstore/memstore) holding the
//     catalogue's schema, in place of the DynamoDB events table;
//   - an in-memory Pub/Sub as the bus (Bus), in place of Kafka: one
//     ordered log per topic;
//   - the command handlers of every domain of the catalogue
//     (eventpipe.WriteSide.RunCommandHandlers, the same dispatcher and
//     middlewares as `eventpipe serve`) on the commands topics;
//   - a relay fed from the memory store's change feed in place of the
//     table's DynamoDB Stream: every committed event and outbound record
//     is published as the real relay publishes it (package relay's
//     Translator: the same topics, message ids, payloads and metadata);
//   - optionally, consumers of the catalogue (read models, sagas, the
//     snapshotter, handlers) run by eventpipe.NewConsumers: those that
//     need Postgres run on Config.DB, a real database the caller gives;
//   - a Sender whose SendAndWait publishes a command and waits for its
//     answer.
//
// Pipeline.Settle waits until the pipeline has done everything it was
// given: every append relayed and every message acked by every
// subscriber, including what the consumers' own effects (a saga's
// commands, a handler's messages) started. A test sends, settles, then
// looks at the read models, the store or what a handler recorded, with
// no polling.
//
// # How it differs from the real pipeline
//
// The bus is not Kafka. It has no partitions, no consumer groups and no
// committed offsets: every subscription gets its own copy of every
// message of its topic, from the first, so a consumer that subscribes
// late still gets every message published before; a consumer's start
// (bus.Start: latest, earliest, a time) is therefore not applied,
// nothing resumes after a restart (a new Pipeline starts empty), and
// every message stays in memory until Close.
//
// Order is kept as Kafka keeps it, and more strictly. Kafka keeps the
// order of a partition, so of one partition key (an event's aggregate
// id), and redelivers a nacked message before the ones after it. The bus
// keeps one order per topic: a subscription hands over a topic's
// messages in the order they were published, the next only once the
// previous was acked, and a nacked message again (after
// RedeliveryPause) before any later one. So a consumer sees each
// aggregate's events in sequence order, with no gaps (but for an event
// the relay sent to the poison topic); it sees a message twice only
// when it nacked it. It also never sees two messages of a
// topic at once, even of different aggregates, where Kafka hands a
// consumer several partitions in parallel; and the at-least-once
// redeliveries Kafka makes after a crash or a rebalance do not happen.
// Consumers must still cope with those: test that against the local
// stack's Kafka (package testkit/integration).
//
// The relay reads the store's change feed, not a DynamoDB Stream: no
// shards, leases or checkpoints, and a message is published once per
// Pipeline (the bus's Publish does not fail while it is open), each
// append's messages in order. A record the translator refuses (an
// upcaster fails) goes to the relay's poison topic as a message of this
// package (PoisonRecord), not the stream-record form of
// relay.PoisonMessage.
//
// Not in the pipeline: the HTTP API, the analytics table, its relay and
// aggregation consumer (they need DynamoDB and Kafka), Kafka lag metrics,
// and the status page. Search models run only when Config.Search gives
// an Elasticsearch client.
package pipeline
