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

// heldStore is the real store with a gate before appends to one
// aggregate: while hold is set, an append of events to it waits until
// release is closed, after the command handler that makes it has read
// STATE and decided. It widens the window between a command's STATE read
// and its append, so that commands decided on the STATE before a
// recalculation reach the table after it, every run.
type heldStore struct {
	eventstore.Store
	id      string
	hold    atomic.Bool
	held    chan struct{} // one send per append held
	release chan struct{}
}

func (h *heldStore) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	if len(req.Events) > 0 && req.Aggregate.ID == h.id && h.hold.Load() {
		h.held <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return eventstore.AppendResult{}, ctx.Err()
		}
	}
	return h.Store.Append(ctx, req)
}

// TestRecalculateFencesOffCommandsDecidedOnTheCorruptStateBeforeItsRewrite
// corrupts account b's STATE by hand; four live command handlers on b
// read the corrupt STATE, decide, and are held before their appends;
// recalculate rewrites b (two other handlers keep appending to account e
// meanwhile) and reports success; then the held appends are released
// and the handlers go on sending to b. Every STATE of b read from the
// moment recalculate returned, until the handlers stop, is a fold of the
// log (never the corrupt balance or one derived from it): the held
// appends fail on the rewritten STATE's revision and their commands are
// decided again. At the end STATE equals the fold of the log with every
// accepted command in it, without another recalculation: a second run
// reports b unchanged, account a (right all along) is reported unchanged
// and not written, and the runs are operator actions. (With the STATE
// condition removed from the facet's append, a held append lands on the
// rewritten STATE and this test fails.)
func TestRecalculateFencesOffCommandsDecidedOnTheCorruptStateBeforeItsRewrite(t *testing.T) {
	ctx := context.Background()
	s := newRecalcStack(t)
	s.open(t, "a", 500, -200)
	s.open(t, "b", 1000, -300)
	before, _, _ := s.fold(t, "b")
	if before.Balance != 700 {
		t.Fatalf("b's balance before: %d", before.Balance)
	}
	const corrupt = 999999
	s.corrupt(t, "b", fmt.Sprintf(`{"id":"b","ownerFirst":"","ownerLast":"","balance":%d,"minimumBalance":-1000,"closed":false}`, corrupt))
	s.open(t, "e", 100)

	const heldWriters = 4
	gate := &heldStore{Store: s.store, id: "b", held: make(chan struct{}, heldWriters), release: make(chan struct{})}
	gate.hold.Store(true)
	gated, err := s.catalog.Handlers(gate)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var accepted atomic.Int64 // on b
	for g := range heldWriters + 2 {
		id := "b"
		if g >= heldWriters {
			id = "e" // without a pause, beside the recalculation
		}
		wg.Go(func() {
			h, _ := gated.Lookup(bankaccount.RecordTransaction)
			for i := 0; !stop.Load(); i++ {
				cmd, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, id, map[string]any{"desc": fmt.Sprintf("g%d-%d", g, i), "amount": 1})
				if err != nil {
					t.Error(err)
					return
				}
				r, err := h.Handle(ctx, cmd)
				if err != nil {
					t.Errorf("%s: %v", id, err)
					return
				}
				if id == "b" && r.Status == commands.StatusAccepted {
					accepted.Add(1)
				}
				if id == "b" {
					time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				}
			}
		})
	}
	for range heldWriters { // every b handler decided on the corrupt STATE
		<-gate.held
	}

	res, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store,
		Type: bankaccount.AggregateType, ID: "b", Actor: "alice", Reason: "STATE edited by hand", Retries: 50})
	if err != nil {
		close(gate.release)
		stop.Store(true)
		wg.Wait()
		t.Fatal(err)
	}

	// From here on, b's STATE must be a fold of its log. A sampler reads
	// it over and over while the held appends are released and the
	// handlers go on.
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: "b"}
	var bad atomic.Value
	samples := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-samples:
				return
			default:
			}
			st, err := s.store.State(ctx, ref)
			if err != nil {
				bad.Store(err.Error())
				return
			}
			var acc bankaccount.Account
			if err := json.Unmarshal(st.Data, &acc); err != nil || acc.Balance >= corrupt {
				bad.Store(fmt.Sprintf("STATE at %d after the recalculation: %s", st.Seq, st.Data))
				return
			}
		}
	})
	gate.hold.Store(false)
	close(gate.release)
	for accepted.Load() < heldWriters+20 {
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(samples)
	sampler.Wait()
	if b := bad.Load(); b != nil {
		t.Fatalf("the corrupt STATE came back after recalculate reported success: %v", b)
	}

	if res.Changed != 1 || len(res.Aggregates) != 1 || !res.Aggregates[0].Changed {
		t.Fatalf("recalculate b: %+v", res)
	}
	rec := res.Aggregates[0]
	var was bankaccount.Account
	if err := json.Unmarshal(rec.Was, &was); err != nil || was.Balance != corrupt || rec.Version != 3 || rec.Attempts != 1 {
		t.Fatalf("recalculated %+v (was: %v); want the corrupt balance found at version 3 in one pass", rec, err)
	}
	log, state, version := s.fold(t, "b")
	if log != state || log.Balance != 700+accepted.Load() {
		t.Fatalf("b at %d: STATE %+v, log's fold %+v, want balance %d", version, state, log, 700+accepted.Load())
	}
	again, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store,
		Type: bankaccount.AggregateType, ID: "b"})
	if err != nil || again.Unchanged != 1 || again.Changed != 0 {
		t.Fatalf("second run on b: %+v, %v; want unchanged", again, err)
	}

	// a was right: unchanged, and STATE's updatedAt did not move.
	refA := eventstore.Ref{Type: bankaccount.AggregateType, ID: "a"}
	st, err := s.store.State(ctx, refA)
	if err != nil {
		t.Fatal(err)
	}
	resA, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store,
		Type: bankaccount.AggregateType, ID: "a", Actor: "alice"})
	if err != nil || resA.Unchanged != 1 || resA.Aggregates[0].Changed || string(resA.Aggregates[0].Was) != string(st.Data) {
		t.Fatalf("recalculate a: %+v, %v; want unchanged", resA, err)
	}
	if st2, err := s.store.State(ctx, refA); err != nil || !st2.UpdatedAt.Equal(st.UpdatedAt) || st2.Revision != st.Revision {
		t.Fatalf("a's STATE was written: %+v → %+v (%v)", st, st2, err)
	}

	actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: s.ep}, Action: operator.ActionRecalculate})
	if err != nil || len(actions) != 3 {
		t.Fatalf("operator actions: %+v, %v; want 3", actions, err)
	}
	if a := actions[2]; a.Actor != "alice" || a.Target != "bankaccount/b" || a.Reason != "STATE edited by hand" || a.Result != "1 changed, 0 unchanged" {
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

	// d was last appended to before the by-type index existed: its
	// #METADATA item has no index keys, and the first --all gives it them.
	_, err = testenv.DynamoDB(t).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.ep.EventsTable),
		Key: map[string]types.AttributeValue{
			ddbstore.AttrPK: &types.AttributeValueMemberS{Value: ddbstore.PartitionKey(eventstore.Ref{Type: bankaccount.AggregateType, ID: "d"})},
			ddbstore.AttrSK: &types.AttributeValueMemberS{Value: ddbstore.SKMetadata},
		},
		UpdateExpression: aws.String("REMOVE gsi1pk, gsi1sk"),
	})
	if err != nil {
		t.Fatal(err)
	}
	// --all works on several aggregates at once: d, after c, may be
	// done in the run that stops at c, or in the one resumed after it.
	res, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store, Type: bankaccount.AggregateType, All: true})
	if !errors.As(err, &refused) || res.Last != "a" || res.Unchanged < 1 || res.Changed+res.Unchanged > 2 || res.Indexed != 1 {
		t.Fatalf("--all: %+v, %v; want d indexed, stopped at c, done up to a", res, err)
	}
	resumed, err := operator.Recalculate(ctx, operator.RecalculateConfig{Process: eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}, Store: s.store, Type: bankaccount.AggregateType, All: true, After: "c"})
	if err != nil || resumed.Last != "d" || res.Changed+resumed.Changed != 1 || resumed.Changed+resumed.Unchanged != 1 || len(resumed.Aggregates) != 0 {
		t.Fatalf("--all --after c: %+v, %v (first run %+v); want d rewritten once over the two runs", resumed, err, res)
	}
	if log, state, _ := s.fold(t, "d"); log != state || state.Balance != 100 {
		t.Fatalf("d: STATE %+v, fold %+v", state, log)
	}
}

// TestRecalculateRefusesBadInput: table of configurations refused with a
// *eventstore.ValidationError before anything is read.
func TestRecalculateRefusesBadInput(t *testing.T) {
	for name, cfg := range map[string]operator.RecalculateConfig{
		"unknown type":        {Type: "nope", ID: "x"},
		"no id, not all":      {Type: bankaccount.AggregateType},
		"id and all":          {Type: bankaccount.AggregateType, ID: "x", All: true},
		"after without all":   {Type: bankaccount.AggregateType, ID: "x", After: "a"},
		"reindex without all": {Type: bankaccount.AggregateType, ID: "x", Reindex: true},
		"negative workers":    {Type: bankaccount.AggregateType, All: true, Workers: -1},
		"too many workers":    {Type: bankaccount.AggregateType, All: true, Workers: 65},
		"page too large":      {Type: bankaccount.AggregateType, All: true, PageSize: eventstore.MaxPageSize + 1},
		"id with #":           {Type: bankaccount.AggregateType, ID: "a#b"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := operator.Recalculate(context.Background(), operator.RecalculateConfig{Type: cfg.Type, ID: cfg.ID, All: cfg.All, After: cfg.After,
				Reindex: cfg.Reindex, Workers: cfg.Workers, PageSize: cfg.PageSize})
			var val *eventstore.ValidationError
			if !errors.As(err, &val) {
				t.Fatalf("%v, want *eventstore.ValidationError", err)
			}
		})
	}
}
