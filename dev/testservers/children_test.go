package testservers_test

import (
	"context"
	"os"
	"testing"

	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// TestMain runs the broker and Elasticsearch-API server children.
func TestMain(m *testing.M) {
	testservers.RunChildIfRequested()
	os.Exit(m.Run())
}

// TestSecureChildrenStartAndTheBrokerRestarts starts the secured broker
// and Elasticsearch-API server children, checks that each answers with
// its security settings, and kills and restarts the broker on its data.
func TestSecureChildrenStartAndTheBrokerRestarts(t *testing.T) {
	s := testservers.StartSecureServices(t)
	ctx := context.Background()
	ep := s.Endpoints
	if err := probe.Elasticsearch(ctx, ep.Elasticsearch, ep.ElasticsearchSecurity); err != nil {
		t.Fatalf("secured es-server child: %v", err)
	}
	if err := probe.Kafka(ctx, ep.KafkaBrokers, ep.Kafka); err != nil {
		t.Fatalf("secured broker child: %v", err)
	}
	s.Broker.Kill()
	if err := probe.Kafka(ctx, ep.KafkaBrokers, ep.Kafka); err == nil {
		t.Fatal("the broker child answers after Kill")
	}
	s.Broker.Start()
	if err := probe.Kafka(ctx, ep.KafkaBrokers, ep.Kafka); err != nil {
		t.Fatalf("restarted broker child: %v", err)
	}
}
