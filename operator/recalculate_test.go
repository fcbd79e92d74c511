package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/operator"
)

// recalcStack is the real stack for a recalculation: a fresh events
// table, a migrated Postgres schema, the built-in catalogue's command
// handlers on the store.
type recalcStack struct {
	ep       eventpipe.Endpoints
	catalog  *eventpipe.Catalog
	store    *ddbstore.Store
	handlers *commands.Registry
}

func newRecalcStack(t *testing.T) *recalcStack {
	t.Helper()
	ctx := context.Background()
	ep := rigs.Endpoints(t)
	_, ep.Postgres = testenv.PostgresSchema(t, "recalc")
	ddb := testenv.DynamoDB(t)
	ep.LeasesTable, ep.AnalyticsTable = testenv.UniqueName(t, "leases"), testenv.UniqueName(t, "analytics")
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, ep.LeasesTable); testenv.DeleteTable(t, ddb, ep.AnalyticsTable) })
	catalog := eventpipe.Builtin()
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep, Logger: slog.New(slog.DiscardHandler)}}); err != nil {
		t.Fatal(err)
	}
	store, err := eventpipe.OpenStore(ctx, ep, catalog, nil)
	if err != nil {
		t.Fatal(err)
	}
	handlers, err := catalog.Handlers(store)
	if err != nil {
		t.Fatal(err)
	}
	return &recalcStack{ep: ep, catalog: catalog, store: store, handlers: handlers}
}

// send handles one command through the live command handler of its type.
func (s *recalcStack) send(t testing.TB, typ, id string, payload any) commands.Result {
	t.Helper()
	h, ok := s.handlers.Lookup(typ)
	if !ok {
		t.Fatalf("no handler of %s", typ)
	}
	cmd, err := commands.NewJSON(typ, bankaccount.AggregateType, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Handle(context.Background(), cmd)
	if err != nil {
		t.Fatalf("%s %s: %v", typ, id, err)
	}
	return res
}

// corrupt overwrites the STATE item's JSON by hand, as a bad deploy or a
// manual edit would.
func (s *recalcStack) corrupt(t *testing.T, id, state string) {
	t.Helper()
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
	_, err := testenv.DynamoDB(t).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(s.ep.EventsTable),
		Key: map[string]types.AttributeValue{
			ddbstore.AttrPK: &types.AttributeValueMemberS{Value: ddbstore.PartitionKey(ref)},
			ddbstore.AttrSK: &types.AttributeValueMemberS{Value: ddbstore.SKState},
		},
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": ddbstore.AttrState},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: state}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fold is the log's fold by the ledger's rules, and the STATE item.
func (s *recalcStack) fold(t *testing.T, id string) (log bankaccount.Account, state bankaccount.Account, version int64) {
	t.Helper()
	ctx := context.Background()
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
	evs, err := s.store.Load(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if log, err = bankaccount.Processor().Replay(evs); err != nil {
		t.Fatal(err)
	}
	st, err := s.store.State(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(st.Data, &state); err != nil {
		t.Fatal(err)
	}
	if st.Seq != evs[len(evs)-1].Sequence {
		t.Fatalf("STATE of %s at %d, log at %d", id, st.Seq, evs[len(evs)-1].Sequence)
	}
	return log, state, st.Seq
}

func (s *recalcStack) open(t *testing.T, id string, amounts ...int64) {
	t.Helper()
	if r := s.send(t, bankaccount.OpenAccount, id, struct{}{}); r.Status != commands.StatusAccepted {
		t.Fatalf("open %s: %+v", id, r)
	}
	for i, a := range amounts {
		if r := s.send(t, bankaccount.RecordTransaction, id, map[string]any{"desc": fmt.Sprintf("t%d", i), "amount": a}); r.Status != commands.StatusAccepted {
			t.Fatalf("transaction %d of %s: %+v", a, id, r)
		}
	}
}

// TestRecalculateRewritesACorruptedStateBesideLiveCommandsAndLeavesARightOneUnchanged
// corrupts account b's STATE by hand and recalculates it while live
// command handlers keep appending transactions to it from 4 goroutines:
// STATE ends equal to the fold of the log (whatever the interleaving, a
// command on the corrupt STATE included), the result says what it was,
// a second run reports it unchanged, account a (right all along) is
// reported unchanged and not written, and both runs are operator
// actions.
func TestRecalculateRewritesACorruptedStateBesideLiveCommandsAndLeavesARightOneUnchanged(t *testing.T) {
	ctx := context.Background()
	s := newRecalcStack(t)
	s.open(t, "a", 500, -200)
	s.open(t, "b", 1000, -300)
	before, _, _ := s.fold(t, "b")
	s.corrupt(t, "b", `{"id":"b","ownerFirst":"","ownerLast":"","balance":999999,"minimumBalance":-1000,"closed":false}`)

	s.open(t, "e", 100)

	// Live command handlers until the recalculation is done: two writers
	// on b, each sending a transaction every 50–100 ms, and two on e
	// without a pause. (An aggregate that takes commands back to back
	// without a gap can starve a recalculation: it then stops with a
	// *eventstore.ConcurrencyError after its retries.)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var sent atomic.Int64 // accepted on b
	for g := range 4 {
		id := []string{"b", "e"}[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, _ := s.handlers.Lookup(bankaccount.RecordTransaction)
			for i := 0; !stop.Load(); i++ {
				cmd, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, id, map[string]any{"desc": fmt.Sprintf("g%d-%d", g, i), "amount": 1})
				if err != nil {
					t.Error(err)
					return
				}
				if r, err := h.Handle(ctx, cmd); err == nil && r.Status == commands.StatusAccepted && id == "b" {
					sent.Add(1)
				}
				if id == "b" {
					// A gap long enough that a recalculation (read the log,
					// fold it, write) fits in one now and then on a machine
					// several times slower than a quiet one: with a write
					// every ~10 ms, 50 retries of a ~60 ms pass all failed.
					time.Sleep(time.Duration(50+rand.IntN(50)) * time.Millisecond)
				}
			}
		}()
	}
	for sent.Load() < 8 { // the live commands run on the corrupt STATE first
		time.Sleep(5 * time.Millisecond)
	}
	res, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store,
		Type: bankaccount.AggregateType, ID: "b", Actor: "alice", Reason: "STATE edited by hand", Retries: 50})
	mid := sent.Load()
	for sent.Load() < mid+20 { // and go on after it
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed != 1 || len(res.Aggregates) != 1 || !res.Aggregates[0].Changed {
		t.Fatalf("recalculate b: %+v", res)
	}
	t.Logf("b recalculated at version %d in %d passes", res.Aggregates[0].Version, res.Aggregates[0].Attempts)
	var was bankaccount.Account
	if err := json.Unmarshal(res.Aggregates[0].Was, &was); err != nil || was.Balance < 999999 || was.Balance > 999999+mid {
		t.Fatalf("was %s (%v), want the corrupt balance (999999 and more)", res.Aggregates[0].Was, err)
	}
	if before.Balance != 700 {
		t.Fatalf("b's balance before: %d", before.Balance)
	}

	// Commands that read the corrupt STATE before the rewrite may have
	// appended on top of it after: another pass puts STATE back on the
	// fold, and the pass after that finds nothing to do.
	again, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store,
		Type: bankaccount.AggregateType, ID: "b", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	log, state, version := s.fold(t, "b")
	if log != state || log.Balance != 700+sent.Load() {
		t.Fatalf("b at %d: STATE %+v, log's fold %+v, want balance %d", version, state, log, 700+sent.Load())
	}
	if again.Changed > 0 {
		// Allowed only for commands in flight during the first run.
		t.Logf("second run rewrote b once more: %+v", again.Aggregates[0])
	}
	third, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store,
		Type: bankaccount.AggregateType, ID: "b"})
	if err != nil || third.Unchanged != 1 || third.Changed != 0 {
		t.Fatalf("third run on a quiet b: %+v, %v; want unchanged", third, err)
	}

	// a was right: unchanged, and STATE's updatedAt did not move.
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: "a"}
	st, err := s.store.State(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	resA, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store,
		Type: bankaccount.AggregateType, ID: "a", Actor: "alice"})
	if err != nil || resA.Unchanged != 1 || resA.Aggregates[0].Changed || string(resA.Aggregates[0].Was) != string(st.Data) {
		t.Fatalf("recalculate a: %+v, %v; want unchanged", resA, err)
	}
	if st2, err := s.store.State(ctx, ref); err != nil || !st2.UpdatedAt.Equal(st.UpdatedAt) {
		t.Fatalf("a's STATE was written: %v → %v (%v)", st.UpdatedAt, st2.UpdatedAt, err)
	}

	actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: s.ep}, Action: operator.ActionRecalculate})
	if err != nil || len(actions) != 4 {
		t.Fatalf("operator actions: %+v, %v; want 4", actions, err)
	}
	if a := actions[3]; a.Actor != "alice" || a.Target != "bankaccount/b" || a.Reason != "STATE edited by hand" || a.Result != "1 changed, 0 unchanged" {
		t.Fatalf("first action recorded as %+v", a)
	}
}

// TestRecalculateRefusesALogTheRulesRejectNamingTheEvent appends, around
// the rules, a debit past account c's overdraft limit: recalculating c
// is a *commands.ReplayRefusedError naming that event (sequence, type,
// id), unwrapping to the rules' *eventstore.RuleRejection, and STATE is
// not written. --all over the type stops at c and says where to resume:
// the accounts before it are done, and a run resumed after c does the
// rest.
func TestRecalculateRefusesALogTheRulesRejectNamingTheEvent(t *testing.T) {
	ctx := context.Background()
	s := newRecalcStack(t)
	s.open(t, "a", 100)
	s.open(t, "c", 100)
	s.open(t, "d", 100)
	s.corrupt(t, "d", `{"id":"d","balance":-1}`)
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: "c"}
	req, err := eventstore.Prepare(ref, 2, eventstore.Change{Events: []eventstore.NewEvent{bankaccount.Transacted("around the rules", -5000)}}, s.catalog.Schema())
	if err != nil {
		t.Fatal(err)
	}
	ar, err := s.store.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	stBefore, err := s.store.State(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}

	_, err = operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store, Type: bankaccount.AggregateType, ID: "c"})
	var refused *commands.ReplayRefusedError
	var rej *eventstore.RuleRejection
	if !errors.As(err, &refused) || !errors.As(err, &rej) || !eventstore.IsPermanent(err) {
		t.Fatalf("recalculate c: %v; want a permanent *commands.ReplayRefusedError wrapping a *eventstore.RuleRejection", err)
	}
	if refused.Sequence != 3 || refused.EventType != bankaccount.TransactionAccepted || refused.EventID != ar.EventIDs[0] || rej.Reason != "insufficient funds" {
		t.Fatalf("refused %+v (%v), want event 3 %s %s", refused, rej, bankaccount.TransactionAccepted, ar.EventIDs[0])
	}
	if st, err := s.store.State(ctx, ref); err != nil || st.Seq != stBefore.Seq || !st.UpdatedAt.Equal(stBefore.UpdatedAt) {
		t.Fatalf("c's STATE written after a refusal: %+v, %v", st, err)
	}

	res, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store, Type: bankaccount.AggregateType, All: true})
	if !errors.As(err, &refused) || res.Last != "a" || res.Unchanged != 1 {
		t.Fatalf("--all: %+v, %v; want stopped at c after a", res, err)
	}
	res, err = operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store, Type: bankaccount.AggregateType, All: true, After: "c"})
	if err != nil || res.Last != "d" || res.Changed != 1 || len(res.Aggregates) != 1 {
		t.Fatalf("--all --after c: %+v, %v; want d rewritten", res, err)
	}
	if log, state, _ := s.fold(t, "d"); log != state || state.Balance != 100 {
		t.Fatalf("d: STATE %+v, fold %+v", state, log)
	}
}

// TestRecalculateRefusesBadInput: table of configurations refused with a
// *eventstore.ValidationError before anything is read.
func TestRecalculateRefusesBadInput(t *testing.T) {
	for name, cfg := range map[string]operator.RecalculateConfig{
		"unknown type":      {Type: "nope", ID: "x"},
		"no id, not all":    {Type: bankaccount.AggregateType},
		"id and all":        {Type: bankaccount.AggregateType, ID: "x", All: true},
		"after without all": {Type: bankaccount.AggregateType, ID: "x", After: "a"},
		"id with #":         {Type: bankaccount.AggregateType, ID: "a#b"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := operator.Recalculate(context.Background(), operator.RecalculateConfig{Type: cfg.Type, ID: cfg.ID, All: cfg.All, After: cfg.After})
			var val *eventstore.ValidationError
			if !errors.As(err, &val) {
				t.Fatalf("%v, want *eventstore.ValidationError", err)
			}
		})
	}
}
