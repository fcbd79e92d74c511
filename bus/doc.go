// Package bus connects eventpipe to its message bus: Watermill publishers
// and subscribers on Kafka with the project's defaults, and the topic names
// every part agrees on.
package bus
