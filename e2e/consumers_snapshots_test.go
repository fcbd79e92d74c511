package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestConsumeSnapshotsSnapshotsWhatTheWriteSideAppended runs the pipeline
// as the binary does: commands through the write side's dispatcher (no
// snapshot consumer running: nothing waits for one), then the relay and
// `consume snapshots` with N = 5. The account's 12 events cross 5 and 10,
// and its #SNAPSHOT ends at its version, equal to its STATE.
func TestConsumeSnapshotsSnapshotsWhatTheWriteSideAppended(t *testing.T) {
	ctx := context.Background()
	if !slices.Contains(eventpipe.ConsumerNames(eventpipe.Builtin()), eventpipe.Snapshotter) {
		t.Fatalf("ConsumerNames lacks %q", eventpipe.Snapshotter)
	}
	ep := rigs.Endpoints(t)
	ep.LeasesTable = testenv.UniqueName(t, "leases")
	if err := migrate.CreateLeasesTable(ctx, testenv.DynamoDB(t), ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, testenv.DynamoDB(t), ep.LeasesTable) })
	svc := rigs.NewService(t, ep, testenv.UniqueName(t, "g"))
	id := "acc-snap"
	if res, err := svc.Dispatcher.Dispatch(ctx, mustCmd(t, bankaccount.OpenAccount, bankaccount.AggregateType, id, struct{}{})); err != nil || res.Version != 1 {
		t.Fatalf("open: %+v, %v", res, err)
	}
	for i := range 11 {
		cmd := mustCmd(t, bankaccount.RecordTransaction, bankaccount.AggregateType, id, bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: int64(10 + i)})
		if _, err := svc.Dispatcher.Dispatch(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}

	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep}, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep}, Names: []string{eventpipe.Snapshotter}, SnapshotEvery: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = consumers.Close() })
	running := []*rigs.Background{rigs.GoRun(t, "relay", rel.Run), rigs.GoRun(t, "snapshot consumer", consumers.Run)}

	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
	var snap eventstore.Stored
	integration.Await(t, "the snapshot at 12", func() error {
		for _, b := range running {
			b.Check(t)
		}
		var err error
		snap, err = svc.Store.Snapshot(ctx, ref)
		if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
			t.Fatal(err)
		}
		if snap.Seq != 12 {
			return fmt.Errorf("snapshot at %d", snap.Seq)
		}
		return nil
	})
	state, err := svc.Store.State(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap.Data, state.Data) || state.Seq != 12 {
		t.Errorf("snapshot %s at 12, STATE %s at %d", snap.Data, state.Data, state.Seq)
	}
}
