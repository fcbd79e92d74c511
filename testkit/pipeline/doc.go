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
//   - Watermill's GoChannel Pub/Sub as the bus, in place of Kafka;
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
// # How it differs from the real pipeline
//
// GoChannel is not Kafka. It has no partitions, no consumer groups and
// no committed offsets: every consumer subscribes on its own and gets its
// own copy of every message, and the bus is persistent, so a consumer
// that subscribes late still gets every message published before, from
// the first; a consumer's start (bus.Start: latest, earliest, a time) is
// therefore not applied, nothing resumes after a restart (a new Pipeline
// starts empty), and every message stays in memory until Close. Nor does GoChannel keep one aggregate's
// messages in order: it hands a subscriber its next message before the
// previous one is acked, and a Watermill Router handles them at once,
// so consumers see what they must cope with anyway under Kafka's at
// least once delivery (redeliveries, gaps that the read models repair
// from the store), more often. A nacked message is redelivered at once.
//
// The relay reads the store's change feed, not a DynamoDB Stream: no
// shards, leases or checkpoints, and a message is published once per
// Pipeline (GoChannel's Publish does not fail while it is open). A
// record the translator refuses (an upcaster fails) goes to the relay's
// poison topic as a message of this package (PoisonRecord), not the
// stream-record form of relay.PoisonMessage.
//
// Not in the pipeline: the HTTP API, the analytics table, its relay and
// aggregation consumer (they need DynamoDB and Kafka), Kafka lag metrics,
// and the status page. Search models run only when Config.Search gives
// an Elasticsearch client.
package pipeline
