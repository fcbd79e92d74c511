// Package kafkatest has Kafka helpers for tests, so that tests outside
// bus/kafka need no Kafka client library of their own: an in-process
// broker (franz-go's kfake) with the TLS and SASL a test chooses
// (StartCluster), and a consumer-group member a test drives one protocol
// request at a time (RawMember). Nothing here is for production code.
package kafkatest
