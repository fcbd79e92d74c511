package streamsim_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/dev/streamsim"
	"github.com/eventpipe/eventpipe/relay"
)

// TestRelayDiscoversTheSimulatedLineage: the relay's own shard discovery
// (relay.Shards, paginated DescribeStream through a real
// *dynamodbstreams.Client) and relay.Readable see the simulated split:
// the open initial shards are readable, the children of a split shard
// are not until their parent is finished.
func TestRelayDiscoversTheSimulatedLineage(t *testing.T) {
	sim, err := streamsim.Start(streamsim.Config{Shards: 150})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	parent := sim.OpenShards()[7]
	left, right, err := sim.Split(parent)
	if err != nil {
		t.Fatal(err)
	}
	var api relay.StreamsAPI = sim.Client()
	leases, err := relay.Shards(ctx, api, sim.StreamARN())
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 152 {
		t.Fatalf("relay.Shards found %d shards, want 152 (pagination)", len(leases))
	}
	readable := relay.Readable(leases)
	if len(readable) != 150 || slices.Contains(readable, left) || slices.Contains(readable, right) || !slices.Contains(readable, parent) {
		t.Fatalf("readable %d shards: children of an unfinished parent must wait", len(readable))
	}
	for i := range leases {
		if leases[i].ShardID == parent {
			leases[i].Finished = true
		}
	}
	readable = relay.Readable(leases)
	if !slices.Contains(readable, left) || !slices.Contains(readable, right) || slices.Contains(readable, parent) {
		t.Fatal("children not readable after their parent finished")
	}
}
