package kafka_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/eventpipe/eventpipe/bus/kafka"
)

// TestClosedConnectionsAreRecognisedHoweverReported: the ways sarama and
// franz-go report a connection the broker closed (as it does after a
// failed or missing SASL handshake) all get the hint; other errors not.
func TestClosedConnectionsAreRecognisedHoweverReported(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("ping: %w", errors.New("EOF")), true},
		{errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"), true},
		{errors.New("the broker connection has died and the request will be retried on a new connection"), true},
		{errors.New("broker closed the connection immediately after a request was issued, which often happens when SASL is required but not provided: is SASL missing?"), true},
		{errors.New("UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition."), false},
		{nil, false},
	} {
		if got := kafka.IsClosedConn(tc.err); got != tc.want {
			t.Errorf("IsClosedConn(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
