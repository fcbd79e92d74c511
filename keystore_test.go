package eventpipe_test

import (
	"context"
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestMigrateMakesTheKeysTableForOpenKeyStore: Migrate creates the keys
// table of the endpoints, and OpenKeyStore seals and opens with it
// through the environment's KMS and key (the stack's
// alias/eventpipe-subjects by default).
func TestMigrateMakesTheKeysTableForOpenKeyStore(t *testing.T) {
	ctx := context.Background()
	ep := integration.Isolate(t)
	integration.KMS(t)
	m, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: eventpipe.Builtin(), Endpoints: ep}})
	if err != nil {
		t.Fatal(err)
	}
	if m.KeysTable != ep.KeysTable {
		t.Fatalf("migrated keys table %q, want %q", m.KeysTable, ep.KeysTable)
	}
	keys, err := eventpipe.OpenKeyStore(ctx, ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.KeyForSealing(ctx, "todo/t1", "alice")
	if err != nil {
		t.Fatalf("a key through %s with %s: %v", ep.KMS, ep.KMSKeyID, err)
	}
	sealed, err := privacy.Seal(k, []byte("b"), []byte("Alice"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := eventpipe.OpenKeyStore(ctx, ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := privacy.Open(ctx, again, []byte("b"), sealed); err != nil || string(got) != "Alice" {
		t.Fatalf("open with another store on the same table: %q, %v", got, err)
	}
	bad := ep
	bad.KMSKeyID = "alias/"
	if _, err := eventpipe.OpenKeyStore(ctx, bad, nil); err == nil {
		t.Fatal("OpenKeyStore took the key id alias/")
	}
}
