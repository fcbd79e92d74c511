package bankaccount_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
)

// uniqueDescriptionsWholeLog is bankaccount.UniqueDescriptions written as
// a history rule that reads the whole log: a transaction whose
// description an earlier transaction of the account already had is
// refused. The Account state does not keep descriptions; the rule looks
// at the events, then hands over to the ledger's own TransactionAccepted
// rule. The fold rule must answer exactly as this one does.
func uniqueDescriptionsWholeLog() eventstore.Processor[bankaccount.Account] {
	p := bankaccount.Processor()
	ledgerRule := p.Rules[bankaccount.TransactionAccepted]
	rules := maps.Clone(p.Rules)
	delete(rules, bankaccount.TransactionAccepted)
	return eventstore.Processor[bankaccount.Account]{
		Initial: p.Initial,
		Rules:   rules,
		HistoryRules: map[string]eventstore.HistoryRule[bankaccount.Account]{
			bankaccount.TransactionAccepted: func(a bankaccount.Account, ev eventstore.Envelope, h eventstore.History, out *eventstore.Outbox) (bankaccount.Account, error) {
				if err := h.RequirePast(); err != nil {
					return a, err
				}
				var tx bankaccount.TransactionAcceptedData
				if err := ev.DecodePayload(&tx); err != nil {
					return a, err
				}
				for _, prev := range h.Before() {
					var p bankaccount.TransactionAcceptedData
					if prev.EventType == bankaccount.TransactionAccepted && prev.DecodePayload(&p) == nil && p.Desc == tx.Desc {
						return a, eventstore.RejectWith(bankaccount.ErrDuplicateDesc, "a transaction with this description was recorded at sequence %d (the description is not repeated here: it may be personal data)", prev.Sequence)
					}
				}
				return ledgerRule(a, ev, out)
			},
		},
	}
}

func rejected(t *testing.T, err error, seq int64, reason string) {
	t.Helper()
	var rej *eventstore.RuleRejection
	if !errors.As(err, &rej) || rej.Sequence != seq || rej.Reason != reason {
		t.Fatalf("got %v, want rejection of sequence %d: %s", err, seq, reason)
	}
}

// TestLedgerWithUniqueDescriptionsAppendsThroughRecalculate runs the
// unique-descriptions fold rule on a real facet: Append, which reads only
// STATE, says the rule needs the past and writes nothing; Recalculate
// reads every event, so it refuses a repeated description (in the log or
// in the same append) and accepts new ones, outbound events included; its
// STATE equals a replay of the whole log (by the fold rule and by the
// whole-log rule), Load replays the log rather than trust a snapshot
// that holds no descriptions, and a repeat the plain ledger let through
// is caught on the next recalculation.
func TestLedgerWithUniqueDescriptionsAppendsThroughRecalculate(t *testing.T) {
	ctx := context.Background()
	plain, s, client, table := newLedger(t)
	ledger, err := eventstore.NewFacet(eventstore.FacetConfig[bankaccount.Account]{Store: s, AggregateType: bankaccount.AggregateType, Processor: bankaccount.UniqueDescriptions()})
	if err != nil {
		t.Fatal(err)
	}
	id := "acc-unique"
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
	change := func(evs ...eventstore.NewEvent) eventstore.Change { return eventstore.Change{Events: evs} }

	// Events whose rules do not need the past append as usual.
	if _, err := ledger.Append(ctx, id, change(bankaccount.Opened(id))); err != nil {
		t.Fatal(err)
	}
	before := render(partition(t, client, table, id))
	_, err = ledger.Append(ctx, id, change(bankaccount.Transacted("rent", -100)))
	if !errors.Is(err, eventstore.ErrPastNotLoaded) || !eventstore.IsPermanent(err) {
		t.Fatalf("Append of a transaction: %v, want permanent ErrPastNotLoaded", err)
	}
	if after := render(partition(t, client, table, id)); after != before {
		t.Fatal("an append refused for want of history changed the partition")
	}

	res, err := ledger.Recalculate(ctx, id, change(bankaccount.Transacted("rent", -100), bankaccount.Transacted("salary", 500)))
	if err != nil || res.State.Seq != 3 || res.State.Item.Balance != 400 {
		t.Fatalf("Recalculate with two transactions: %+v, %v", res.State, err)
	}

	before = render(partition(t, client, table, id))
	_, err = ledger.Recalculate(ctx, id, change(bankaccount.Transacted("rent", -100)))
	rejected(t, err, 4, `a transaction with this description was recorded at sequence 2 (the description is not repeated here: it may be personal data)`)
	_, err = ledger.Recalculate(ctx, id, change(bankaccount.Transacted("gift", 10), bankaccount.Transacted("gift", 10)))
	rejected(t, err, 5, `a transaction with this description was recorded at sequence 4 (the description is not repeated here: it may be personal data)`)
	if after := render(partition(t, client, table, id)); after != before {
		t.Fatal("a rejected recalculation changed the partition")
	}

	// The ledger's own rule still runs behind the history rule.
	res, err = ledger.Recalculate(ctx, id, change(bankaccount.Transacted("car", -600)))
	if err != nil || res.State.Item.Balance != -200 || len(res.Outbound) != 1 || res.Outbound[0].Name != bankaccount.OutboundAccountOverdrawn {
		t.Fatalf("overdrawing transaction: %+v, outbound %+v, %v", res.State, res.Outbound, err)
	}

	// STATE, a recalculation and Load all equal a replay of the whole log.
	events, err := s.Load(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	folded, err := bankaccount.UniqueDescriptions().Replay(events)
	if err != nil {
		t.Fatal(err)
	}
	want := bankaccount.Account{ID: id, Balance: -200, MinimumBalance: bankaccount.DefaultMinimumBalance}
	if folded != want {
		t.Fatalf("replay of the log %+v, want %+v", folded, want)
	}
	if whole, err := uniqueDescriptionsWholeLog().Replay(events); err != nil || whole != folded {
		t.Fatalf("whole-log replay %+v, %v; want %+v", whole, err, folded)
	}
	verified, err := ledger.Recalculate(ctx, id, eventstore.Change{})
	if err != nil || verified.State.Item != folded || verified.State.Seq != 4 || len(verified.Outbound) != 0 {
		t.Fatalf("Recalculate %+v (outbound %v, %v), want %+v at 4", verified.State, verified.Outbound, err, folded)
	}
	if got, err := ledger.Get(ctx, id); err != nil || got.Item != folded || got.Seq != 4 {
		t.Fatalf("STATE %+v, %v", got, err)
	}

	// A snapshot of a state alone holds no descriptions, so Load of the
	// facet replays the log instead (the plain ledger trusts the
	// snapshot).
	bogus, _ := json.Marshal(bankaccount.Account{ID: id, Balance: 999999})
	if err := s.PutSnapshot(ctx, ref, eventstore.Stored{Seq: 4, Data: bogus, UpdatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if loaded, err := ledger.Load(ctx, id); err != nil || loaded.Item != folded || loaded.Seq != 4 {
		t.Fatalf("Load %+v, %v; want the replayed %+v at 4", loaded, err, folded)
	}
	if loaded, err := plain.Load(ctx, id); err != nil || loaded.Item.Balance != 999999 {
		t.Fatalf("plain Load %+v, %v: want the snapshot", loaded, err)
	}

	// Why it needs history: the plain ledger, which reads only STATE,
	// cannot see that "rent" was used and appends it again. The next
	// recalculation of the history facet finds the repeat in the log.
	if _, err := plain.Append(ctx, id, change(bankaccount.Transacted("rent", -100))); err != nil {
		t.Fatalf("plain ledger: %v", err)
	}
	_, err = ledger.Recalculate(ctx, id, eventstore.Change{})
	rejected(t, err, 5, `a transaction with this description was recorded at sequence 2 (the description is not repeated here: it may be personal data)`)
}

// TestCommandHandlersOfAHistoryFacetSeeThePast runs commands through
// commands.NewFacetHandler on the ledger with unique descriptions: the
// handler appends with the past loaded (Facet.AppendWithHistory), so a
// repeated description is a rejected command, not an invalid one, and
// concurrent commands on one account each land once after retrying on
// the versions they raced for.
func TestCommandHandlersOfAHistoryFacetSeeThePast(t *testing.T) {
	ctx := context.Background()
	_, s, _, _ := newLedger(t)
	ledger, err := eventstore.NewFacet(eventstore.FacetConfig[bankaccount.Account]{Store: s, AggregateType: bankaccount.AggregateType, Processor: bankaccount.UniqueDescriptions()})
	if err != nil {
		t.Fatal(err)
	}
	if !ledger.NeedsHistory() {
		t.Fatal("NeedsHistory is false for a processor with history rules")
	}
	open, err := commands.NewFacetHandler(commands.FacetHandlerConfig[bankaccount.Account]{CommandType: bankaccount.OpenAccount, Facet: ledger,
		Decide: func(cur eventstore.State[bankaccount.Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
			return []eventstore.NewEvent{bankaccount.Opened(cmd.AggregateID)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	transact, err := commands.NewFacetHandler(commands.FacetHandlerConfig[bankaccount.Account]{CommandType: bankaccount.RecordTransaction, Facet: ledger,
		MaxAttempts: 50, Decide: func(cur eventstore.State[bankaccount.Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
			var d bankaccount.TransactionAcceptedData
			if err := cmd.DecodePayload(&d); err != nil {
				return nil, err
			}
			return []eventstore.NewEvent{bankaccount.Transacted(d.Desc, d.Amount)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	id := "acc-history-commands"
	cmd := func(typ string, payload any) commands.Command {
		c, err := commands.NewJSON(typ, bankaccount.AggregateType, id, payload)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if res, err := open.Handle(ctx, cmd(bankaccount.OpenAccount, struct{}{})); err != nil || res.Status != commands.StatusAccepted {
		t.Fatalf("open: %+v, %v", res, err)
	}
	rent := cmd(bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -100})
	if res, err := transact.Handle(ctx, rent); err != nil || res.Status != commands.StatusAccepted || res.Version != 2 {
		t.Fatalf("rent: %+v, %v", res, err)
	}
	if res, err := transact.Handle(ctx, rent); err != nil || res.Status != commands.StatusAccepted || !res.Duplicate {
		t.Fatalf("rent again, same command id: %+v, %v; want the first answer", res, err)
	}
	res, err := transact.Handle(ctx, cmd(bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -100}))
	if err != nil || res.Status != commands.StatusRejected || !errors.Is(res.Err(), bankaccount.ErrDuplicateDesc) || res.Reason != `a transaction with this description was recorded at sequence 2 (the description is not repeated here: it may be personal data)` {
		t.Fatalf("a second rent: %+v, %v; want rejected by the history rule", res, err)
	}

	const racers = 3
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	for i := range racers {
		wg.Go(func() {
			res, err := transact.Handle(ctx, cmd(bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: fmt.Sprintf("gift %d", i), Amount: 10}))
			if err == nil && res.Status != commands.StatusAccepted {
				err = fmt.Errorf("gift %d: %+v", i, res)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got, err := ledger.Get(ctx, id)
	if err != nil || got.Seq != 2+racers || got.Item.Balance != -100+10*racers {
		t.Fatalf("after the race: %+v, %v", got, err)
	}
}
