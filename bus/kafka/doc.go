// Package kafka is the bus on Kafka: Watermill publishers and subscribers
// with eventpipe's defaults, the command Sender that publishes commands
// and waits for their answers, and consumer-group lag metrics.
//
// It is also the one place that talks to Kafka's client libraries (sarama
// and franz-go; bus/kafka/keyed and bus/kafka/kafkatest aside): other
// packages use its small API instead. GroupConsumer is a consumer-group
// member for consumers that take a partition's records in batches and
// mark what they are done with (analytics/aggregator). ReadTopic reads a
// topic from its start (or a time) to its end as of the call, outside any
// group (poison topics); TopicReader follows topics as records arrive
// (tools, tests). OffsetReader reads groups' positions and topics'
// offsets, lists topics by prefix and describes groups (DescribeGroup);
// Ping tells whether the brokers answer with the given security (health
// checks). Records come out of all of them as Record.
//
// The Publisher writes with acks from all replicas and an idempotent
// producer. A message's bus.MetadataPartitionKey (the aggregate id) is its
// record key: the messages of one key go to one partition, in order;
// messages without one go to a random partition each, so they spread over
// the topic with no order among them.
//
// The Subscriber is a consumer-group member per Subscribe call
// (watermill-kafka's subscriber): each partition hands out one message at
// a time, so a key's messages arrive in order; delivery is at least once.
// A partition the group has never committed starts at InitialOffset (the
// oldest record by default). A subscription stops, leaves its group and
// closes its channel within a bound when its Subscribe context ends or the
// Subscriber is closed, and the group recovers from a crashed member
// within about SessionTimeout + RebalanceTimeout. SubscribeInitialize
// creates a missing topic with the broker's default partitions.
// bus/kafka/keyed is the other subscriber: many messages of a partition in
// flight, one key's in order.
//
// Every client the package builds (the Publisher, the Subscriber and its
// topic creation, the keyed subscriber, the Sender, the GroupConsumer,
// ConsumerLag, TopicMessages, the LagMonitor, the OffsetReader,
// ReadTopic, the TopicReader, Ping and StartGroup) connects as its
// config's Security says: TLS (tlsconfig) and SASL PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512 or AWS MSK IAM (OAUTHBEARER with a token of
// aws-msk-iam-sasl-signer-go). Security.ApplySarama and Security.KgoOpts
// configure sarama and franz-go clients built elsewhere the same way. The
// zero Security is plain text without authentication. A wrong CA, password
// or mechanism fails the client's construction or first request with an
// error naming the security in use (never its secrets).
//
// TestUniversalPubSubWithSubscriber runs Watermill's universal Pub/Sub
// suite (pubsub/tests, in its short mode) on the stack's broker against
// the Publisher and the Subscriber, with the features they promise:
// consumer groups, persistence, at-least-once delivery. It shows that
// every message published arrives (to concurrent subscribers of one group,
// on many topics at once, after nacks, across subscribers closed and
// opened again), that two groups each get every message, that topics are
// kept apart, that a message's context ends after its ack and when the
// subscriber closes, and that a subscription whose context ends closes its
// channel while a new one gets the rest. It claims no order (the suite's
// messages have no key; per-key order has its own tests), no exactly-once
// delivery, and it does not restart the broker.
package kafka
