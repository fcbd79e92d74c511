// Package bus holds what every part of eventpipe agrees on about its
// message bus, independent of the broker: the topic names, the metadata
// keys, the event envelope's message codec and the handler middleware
// chain. It depends on Watermill's message model only; the Kafka adapter
// (publishers, subscribers, the command sender, lag metrics) is bus/kafka,
// so domain code that imports commands never pulls in a Kafka client.
package bus
