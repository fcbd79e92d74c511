// Package keyed is a Kafka consumer-group subscriber for Watermill that
// keeps many messages of a partition in flight while the messages of one
// key stay strictly in order: the idea of Confluent's parallel consumer,
// behind Watermill's message.Subscriber so the Router, its middleware and
// its metrics work unchanged. Subscribers has the signature of
// bus/kafka.Subscribers and passes Watermill's universal Pub/Sub suite
// with the same features (see below), so it can replace it wherever the
// order across the keys of a partition does not matter (see When to use
// it).
//
// # When to use it
//
// bus/kafka's subscriber (watermill-kafka's) hands out one message per
// partition and waits for its ack before the next: strict partition order,
// one message at a time, so a partition's throughput is one handler call
// after another and a batching handler never sees two messages of a
// partition. Use this package for consumers whose effects are per key
// (the record key is bus.MetadataPartitionKey, the aggregate id) and that
// gain from concurrency or batching: projections, sagas, command handlers.
// Keep bus/kafka's subscriber where order across keys of a partition
// matters, or where handlers must not run concurrently at all. The gain
// is the handlers' own: a projection's batches grow with it (runner/raw
// 0.10 to 0.66 in BenchmarkProjectionVsRawBatchedUpsert), while command
// handlers bound by the event store's appends gain little
// (BenchmarkCommandsThroughBus measured 0.87 keyed against 0.93 with
// bus/kafka's subscriber, relative to direct dispatch, in one run).
//
// # Guarantees
//
//   - Per-key order. A message is handed out only after the previous
//     message of its key (same partition) was acked; a nacked message is
//     handed out again, after NackResendSleep, before any later message of
//     its key, while other keys keep flowing. Records without a key count
//     as one key of their partition (bus/kafka's Publisher spreads
//     unkeyed messages over the partitions, so they have no order
//     overall). Across process runs and rebalances the order holds from
//     the last committed offset on: a new owner may repeat messages the
//     old one processed, in order, never skip one. A partition the group
//     has never committed starts at InitialOffset (the oldest record by
//     default).
//   - At least once. Handlers must be idempotent.
//   - Contiguous commits. A partition marks, and commits, only the offset
//     below which every record was acked; a record not acked holds the
//     commit back however many later ones are acked.
//   - Bounded redelivery. After a crash or a rebalance exactly what was
//     not committed is redelivered: at most MaxInFlight records per
//     partition, since a partition reads no further than MaxInFlight
//     records past its last commit (unless a commit fails, which the next
//     one retries).
//   - Message contexts. Each message handed out has its own context,
//     derived from the Subscribe context and carrying its partition and
//     offset; it ends once the message is acked or nacked (a redelivery
//     gets a new one), or when the partition is revoked before the ack.
//   - Bounded stops. A subscription whose Subscribe context ends stops on
//     its own, as Close stops every subscription: it commits what was
//     acked, leaves the group and closes its channel, within
//     RevokeTimeout plus twice CloseTimeout.
//
// # How it works
//
// Each Subscribe call is one sarama consumer-group member. Per claimed
// partition, records go into a window (read, not yet committed) and into
// a queue per key; each key with records waiting has one worker that
// sends them to the output channel one at a time and waits for the ack.
// Acks advance the acked prefix of the window, whose end is marked; a
// committer commits the session's marks every CommitInterval and as soon
// as a partition's window is half full of acked records, and the window
// drops what was committed. A revoked partition (rebalance, Close, end of
// the Subscribe context) hands nothing more out, waits up to
// RevokeTimeout for the acks of messages in flight, then cancels the
// contexts of those still unacked and leaves them to the next owner. A
// member whose group fails rejoins with a new client after
// ReconnectRetrySleep.
//
// # Universal suite
//
// TestUniversalPubSub runs Watermill's universal Pub/Sub suite
// (pubsub/tests, in its short mode) on the stack's broker against
// bus/kafka's Publisher and this Subscriber, claiming consumer groups,
// persistence and at-least-once delivery, as bus/kafka's subscriber does:
// every message published arrives (to concurrent members of a group, on
// many topics, after nacks, across subscribers closed and opened again),
// two groups each get every message, topics are kept apart, message
// contexts end after the ack and on Close, and a subscription whose
// context ends closes its channel while a new one gets the rest. It claims
// no order, since its messages have no key: the order tests of this
// package check per-key order.
package keyed
