package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestMigrateWaitsForTheServices: `migrate --wait` started while its
// Kafka broker is down says it waits for Kafka and creates nothing; once
// the broker is back on the same address it migrates and exits 0.
func TestMigrateWaitsForTheServices(t *testing.T) {
	bin := eventpipeBinary(t)
	ep := integration.Isolate(t)
	broker := testservers.StartKafkaBroker(t, t.TempDir())
	broker.Kill()

	cmd := exec.Command(bin, "migrate", "--wait", integration.HangAfter().String())
	cmd.Env = append(os.Environ(), integration.Environ(ep)...)
	cmd.Env = append(cmd.Env, endpoints.EnvKafkaBrokers+"="+broker.Addr)
	var out output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	integration.Await(t, "migrate saying it waits for kafka", func() error {
		select {
		case err := <-done:
			t.Fatalf("migrate exited while its broker was down (%v):\n%s", err, out.String())
		default:
		}
		if !strings.Contains(out.String(), `"migrate: waiting for a service" service=kafka`) {
			return errors.New("not yet")
		}
		return nil
	})
	db := integration.DynamoDB(t)
	_, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(ep.EventsTable)})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("events table while migrate waits: %v, want it not created yet", err)
	}

	broker.Start()
	integration.Await(t, "migrate to finish once the broker is back", func() error {
		select {
		case err := <-done:
			done <- err
			return nil
		default:
			return errors.New("still running")
		}
	})
	if err := <-done; err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `"migrate: service answers" service=kafka`) || !strings.Contains(out.String(), "dynamodb tables "+ep.EventsTable) {
		t.Fatalf("migrate's output does not show the wait and the migration:\n%s", out.String())
	}
	if _, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(ep.EventsTable)}); err != nil {
		t.Fatalf("events table after migrate: %v", err)
	}
}
