package domains_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainCodeImportsNoKafkaClient lists the dependencies of every
// domain package and of the command model they build on: none may be a
// Kafka client, so a user's domain code builds and tests without one (the
// Kafka adapter lives in bus/kafka).
func TestDomainCodeImportsNoKafkaClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./...", "../commands", "../eventstore").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, kafka := range []string{"github.com/IBM/sarama", "github.com/ThreeDotsLabs/watermill-kafka", "github.com/twmb/franz-go", "github.com/eventpipe/eventpipe/bus/kafka"} {
			if strings.HasPrefix(pkg, kafka) {
				t.Errorf("domain code depends on %s", pkg)
			}
		}
	}
}
