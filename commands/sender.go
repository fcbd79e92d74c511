package commands

import "context"

// Sender sends commands onto the bus: Send publishes one on its commands
// topic; SendAndWait also waits for its answer on the replies topic (a
// command id sent before gets the answer it got then). The Kafka sender
// (bus/kafka.Sender, built by eventpipe.NewSender) and the one-process
// sender of the test kit (testkit/pipeline.Sender) both are one, so code
// that sends commands takes a Sender and runs on either.
type Sender interface {
	Send(ctx context.Context, cmd Command) error
	SendAndWait(ctx context.Context, cmd Command) (Result, error)
}
