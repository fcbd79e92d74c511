// Package relay republishes a DynamoDB table's stream onto Kafka: the
// event store's table (events and outbound events, the default
// Translator) and, with its own RecordTranslator, any other table whose
// items belong on the bus, such as the analytics table's raw events
// (analytics/analyticsbus.Translator).
//
// A Relay is one worker on one stream. It keeps a lease per shard in a
// lease table keyed by stream ARN and shard id, so workers of one stream
// (in any number of processes) share its shards, and relays of different
// tables can share one lease table. Each worker takes a fair share of
// the readable shards (their count over the live workers, those holding
// an unexpired lease, rounded up): a new worker takes free leases and
// steals the rest of its share from the workers above theirs in one
// discovery pass. A lease unrenewed for LeaseDuration has expired: it is
// free, and is taken at the next discovery pass of a live worker, within
// LeaseDuration + DiscoveryInterval of its last write (plus the pass's own
// time), even by workers already at their share; stealing then evens the
// shares out.
// Reads of one shard stay under DynamoDB Streams' limit
// (ShardReadsPerSecond); a throttled read backs off. A shard is read only after its
// parent is read to its end; each batch is published and acknowledged by
// Kafka before it is checkpointed, so delivery is at least once and a
// crash repeats at most one batch per shard. A record the translator
// refuses goes to the poison topic Topics.Poison(Config.PoisonGroup)
// with the reason. Metrics carry the label stream=<Config.StreamName>,
// so several relays can register on one Prometheus registry.
//
// A message that carries a trace context (an event whose command was
// traced, see package tracing) is published in a producer span
// "publish <topic>", a child of that context, and carries the span's
// context on to the consumers; the relay starts no trace of its own.
package relay
