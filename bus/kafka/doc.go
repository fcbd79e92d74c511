// Package kafka is the bus on Kafka: Watermill publishers and subscribers
// with eventpipe's defaults (acks from all replicas, idempotent producer,
// partition key = aggregate id, new groups start at the oldest offset,
// bounded stops and crash recovery), the command Sender that publishes
// commands and waits for their answers, and consumer-group lag metrics.
package kafka
