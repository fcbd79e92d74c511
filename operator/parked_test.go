package operator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// TestParkedListShowsAndParkedReapplyReappliesAParkedAggregateOnce parks
// account A at sequence 3 (with 4 and 5 behind it) after 1 and 2 were
// applied, lists the parked events through the root API, and re-applies
// them: the accounts read model applies 3, 4 and 5 once, in order, and A
// is no longer parked. A second re-apply finds nothing to do.
func TestParkedListShowsAndParkedReapplyReappliesAParkedAggregateOnce(t *testing.T) {
	ep := rigs.Endpoints(t)
	admin := testenv.Postgres(t)
	schema := fmt.Sprintf("parked_%016x", rand.Uint64()) // short: a long test name passes Postgres' 63-byte names
	if _, err := admin.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	url := testenv.Endpoints().Postgres
	if strings.Contains(url, "?") {
		url += "&search_path=" + schema
	} else {
		url += "?search_path=" + schema
	}
	ep.Postgres = url
	ctx := context.Background()
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	store, err := eventpipe.OpenStore(ctx, ep, eventpipe.Builtin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: "acc-a"}
	ch := eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event(bankaccount.AccountOpened, bankaccount.AccountOpenedData{ID: ref.ID})}}
	for i := range 4 {
		ch.Events = append(ch.Events, eventstore.Event(bankaccount.TransactionAccepted, bankaccount.TransactionAcceptedData{Desc: fmt.Sprint(i), Amount: 5}))
	}
	req, err := eventstore.Prepare(ref, 0, ch, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	events := res.Events
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	applier, err := projections.NewApplier(projections.ApplierConfig{DB: db, Store: store, Projection: readmodels.Accounts{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applier.Apply(ctx, events[:2]); err != nil {
		t.Fatal(err)
	}
	lot, err := parking.New(parking.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	if err := lot.Park(ctx, "accounts", events[2], "refused"); err != nil {
		t.Fatal(err)
	}
	if _, err := lot.ParkBehind(ctx, "accounts", events[3:]); err != nil {
		t.Fatal(err)
	}

	listed, err := operator.ParkedList(ctx, operator.ParkedListConfig{Process: eventpipe.Process{Endpoints: ep}, Projection: "accounts"})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 3 || listed[0].Envelope.Sequence != 3 || listed[0].Reason != "refused" || listed[2].Envelope.Sequence != 5 || listed[0].Consumer != "accounts" {
		t.Fatalf("ParkedList = %+v", listed)
	}
	if _, err := operator.ParkedList(ctx, operator.ParkedListConfig{Process: eventpipe.Process{Endpoints: ep}, Projection: "no-such-model"}); err == nil {
		t.Fatal("ParkedList of an unknown projection succeeded")
	}
	if _, err := operator.ParkedReapply(ctx, operator.ParkedReapplyConfig{Process: eventpipe.Process{Endpoints: ep}}); err == nil {
		t.Fatal("ParkedReapply without a projection succeeded")
	}

	reapplied, err := operator.ParkedReapply(ctx, operator.ParkedReapplyConfig{Process: eventpipe.Process{Endpoints: ep}, Projection: "accounts", Aggregate: ref})
	if err != nil {
		t.Fatal(err)
	}
	if len(reapplied.Aggregates) != 1 || !reapplied.Aggregates[0].Unparked || reapplied.Aggregates[0].Reapplied != 3 || reapplied.Aggregates[0].Applied != 3 {
		t.Fatalf("ParkedReapply = %+v", reapplied)
	}
	var version, applyCount, balance, position int64
	if err := db.QueryRow(ctx, `SELECT version, apply_count, balance, (SELECT seq FROM projection_positions WHERE projection = 'accounts' AND aggregate_id = $1)
		FROM accounts WHERE account_id = $1`, ref.ID).Scan(&version, &applyCount, &balance, &position); err != nil {
		t.Fatal(err)
	}
	if version != 5 || applyCount != 5 || balance != 20 || position != 5 {
		t.Fatalf("account after the re-apply: version %d, apply count %d, balance %d, position %d; want 5, 5, 20, 5", version, applyCount, balance, position)
	}
	if listed, err = operator.ParkedList(ctx, operator.ParkedListConfig{Process: eventpipe.Process{Endpoints: ep}}); err != nil || len(listed) != 0 {
		t.Fatalf("ParkedList after the re-apply = %+v, %v", listed, err)
	}
	if reapplied, err = operator.ParkedReapply(ctx, operator.ParkedReapplyConfig{Process: eventpipe.Process{Endpoints: ep}, Projection: "accounts"}); err != nil || len(reapplied.Aggregates) != 0 {
		t.Fatalf("second ParkedReapply = %+v, %v", reapplied, err)
	}
}
