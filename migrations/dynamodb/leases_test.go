package dynamodb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/dev/testenv"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

// TestCreateLeasesTableIsIdempotentAndRefusesAnotherShape creates the
// lease table twice (the second call is a no-op) and refuses to adopt a
// table with other keys under the lease table's name.
func TestCreateLeasesTableIsIdempotentAndRefusesAnotherShape(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	name := testenv.UniqueName(t, "leases")
	t.Cleanup(func() { testenv.DeleteTable(t, db, name) })
	for range 2 {
		if err := migrate.CreateLeasesTable(ctx, db, name); err != nil {
			t.Fatal(err)
		}
	}
	other := testenv.UniqueName(t, "events")
	t.Cleanup(func() { testenv.DeleteTable(t, db, other) })
	if err := migrate.CreateEventsTable(ctx, db, other); err != nil {
		t.Fatal(err)
	}
	err := migrate.CreateLeasesTable(ctx, db, other)
	if err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("CreateLeasesTable on an events table = %v, want a shape error", err)
	}
}
