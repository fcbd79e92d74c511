package snapshots_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestMain deletes the table of the benchmark's shared account (see
// sharedLongAccount) once every test and benchmark has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.client != nil {
		if _, err := shared.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(shared.store.Table())}); err != nil {
			fmt.Fprintf(os.Stderr, "delete table %s: %v\n", shared.store.Table(), err)
		}
	}
	os.Exit(code)
}
