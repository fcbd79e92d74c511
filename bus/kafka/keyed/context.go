package keyed

import "context"

type contextKey int

const (
	partitionKey contextKey = iota + 1
	offsetKey
)

// MessagePartitionFromCtx returns the Kafka partition of the message whose
// context (msg.Context()) ctx is, as watermill-kafka's function of that
// name does for its subscriber.
func MessagePartitionFromCtx(ctx context.Context) (int32, bool) {
	p, ok := ctx.Value(partitionKey).(int32)
	return p, ok
}

// MessagePartitionOffsetFromCtx returns the Kafka offset of the message
// whose context ctx is.
func MessagePartitionOffsetFromCtx(ctx context.Context) (int64, bool) {
	o, ok := ctx.Value(offsetKey).(int64)
	return o, ok
}
