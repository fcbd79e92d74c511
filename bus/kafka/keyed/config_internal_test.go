package keyed

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/eventpipe/eventpipe/bus/kafka"
)

// TestSaramaConfigStartsAtInitialOffset: the subscriber's sarama
// configuration starts uncommitted partitions at InitialOffset, the
// oldest by default.
func TestSaramaConfigStartsAtInitialOffset(t *testing.T) {
	for _, tc := range []struct{ set, want int64 }{{0, sarama.OffsetOldest}, {sarama.OffsetNewest, sarama.OffsetNewest}} {
		cfg := Config{Brokers: []string{"127.0.0.1:1"}, ConsumerGroup: "g", InitialOffset: tc.set}
		cfg.setDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		sc, err := cfg.saramaConfig(&kafka.ConnTracker{}, "t")
		if err != nil {
			t.Fatal(err)
		}
		if sc.Consumer.Offsets.Initial != tc.want {
			t.Errorf("InitialOffset %d: sarama starts at %d, want %d", tc.set, sc.Consumer.Offsets.Initial, tc.want)
		}
	}
}
