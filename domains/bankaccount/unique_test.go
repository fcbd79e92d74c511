package bankaccount_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
)

func newMemstore(t testing.TB) *memstore.Store {
	t.Helper()
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// buildAccount opens account id on s and records n-1 credits of 1 through
// the plain ledger (which does not check descriptions): an account of n
// events, the i-th transaction described desc(i).
func buildAccount(tb testing.TB, s eventstore.Store, id string, n int, desc func(i int) string) {
	tb.Helper()
	plain, err := bankaccount.NewFacet(s, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := plain.Append(context.Background(), id, eventstore.Change{Events: []eventstore.NewEvent{bankaccount.Opened(id)}}); err != nil {
		tb.Fatal(err)
	}
	transact(tb, s, id, 1, n, desc)
}

// transact records the transactions from to to-1 (desc(i), amount 1) on
// account id through the plain ledger, 90 to an append.
func transact(tb testing.TB, s eventstore.Store, id string, from, to int, desc func(i int) string) {
	tb.Helper()
	plain, err := bankaccount.NewFacet(s, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := from; i < to; {
		var evs []eventstore.NewEvent
		for ; i < to && len(evs) < 90; i++ {
			evs = append(evs, bankaccount.Transacted(desc(i), 1))
		}
		if _, err := plain.Append(context.Background(), id, eventstore.Change{Events: evs}); err != nil {
			tb.Fatal(err)
		}
	}
}

// handlers returns the handlers of d on s by command type.
func handlers(t testing.TB, d commands.Domain, s eventstore.Store) map[string]commands.Handler {
	t.Helper()
	hs, err := d.NewHandlers(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]commands.Handler{}
	for _, h := range hs {
		out[h.CommandType()] = h
	}
	return out
}

// wholeLogDomain is the ledger's write model on the whole-log rule
// (uniqueDescriptionsWholeLog), deciding as the ledger's commands do for
// the commands the tests send.
func wholeLogDomain() commands.Domain {
	return commands.FacetDomain(bankaccount.AggregateType, uniqueDescriptionsWholeLog(),
		wholeLogDecider(bankaccount.OpenAccount), wholeLogDecider(bankaccount.RecordTransaction), wholeLogDecider(bankaccount.CloseAccount))
}

// wholeLogDecider is wholeLogDomain's decision for command type typ.
func wholeLogDecider(typ string) commands.Decider[bankaccount.Account] {
	switch typ {
	case bankaccount.OpenAccount:
		return commands.OnCommand(bankaccount.OpenAccountCommand, func(cur eventstore.State[bankaccount.Account], cmd commands.Command, _ struct{}) ([]eventstore.NewEvent, error) {
			if cur.Item.ID != "" {
				return nil, commands.ConflictWith(bankaccount.ErrExists, "account %s already exists", cmd.AggregateID)
			}
			return []eventstore.NewEvent{bankaccount.Opened(cmd.AggregateID)}, nil
		})
	case bankaccount.CloseAccount:
		return commands.OnCommand(bankaccount.CloseAccountCommand, func(cur eventstore.State[bankaccount.Account], cmd commands.Command, _ bankaccount.CloseAccountData) ([]eventstore.NewEvent, error) {
			if cur.Item.Closed {
				return nil, commands.ConflictWith(bankaccount.ErrAlreadyClosed, "account %s is already closed", cmd.AggregateID)
			}
			return []eventstore.NewEvent{bankaccount.Closed("")}, nil
		})
	}
	return commands.OnCommand(bankaccount.RecordTransactionCommand, func(_ eventstore.State[bankaccount.Account], _ commands.Command, d bankaccount.TransactionAcceptedData) ([]eventstore.NewEvent, error) {
		return []eventstore.NewEvent{bankaccount.TransactionAcceptedEvent.New(d)}, nil
	})
}

// TestUniqueDescriptionsAnswerAsTheWholeLog sends the same random
// commands (descriptions that repeat, debits past the overdraft, a
// closing, refunds, redelivered commands) to the ledger with unique
// descriptions, whose snapshot function runs at random points (or
// never), and to the same rule reading the whole log: every answer
// (status, reason, version, duplicate) and the final state are the same.
func TestUniqueDescriptionsAnswerAsTheWholeLog(t *testing.T) {
	ctx := context.Background()
	fold := bankaccount.UniqueDescriptionsDomain()
	if fold.NewSnapshot == nil {
		t.Fatal("a domain whose history rule folds has no snapshot function")
	}
	if wholeLogDomain().NewSnapshot != nil {
		t.Fatal("a domain with a whole-log history rule has a snapshot function")
	}
	for run := range 12 {
		rng := rand.New(rand.NewPCG(uint64(run), 3))
		foldStore, wholeStore := newMemstore(t), newMemstore(t)
		fh, wh := handlers(t, fold, foldStore), handlers(t, wholeLogDomain(), wholeStore)
		snapshot, err := fold.NewSnapshot(foldStore, nil)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("acc-%d", run)
		snapEvery := []int{0, 2, 5, 20}[run%4]
		var sent []commands.Command
		send := func(typ string, payload any) {
			t.Helper()
			cmd, err := commands.NewJSON(typ, bankaccount.AggregateType, id, payload)
			if err != nil {
				t.Fatal(err)
			}
			if len(sent) > 0 && rng.IntN(6) == 0 {
				cmd = sent[rng.IntN(len(sent))] // redelivered
			}
			sent = append(sent, cmd)
			typ = cmd.Type
			got, err1 := fh[typ].Handle(ctx, cmd)
			want, err2 := wh[typ].Handle(ctx, cmd)
			if err1 != nil || err2 != nil || got.Status != want.Status || got.Reason != want.Reason || got.Code != want.Code || got.Version != want.Version || got.Duplicate != want.Duplicate {
				t.Fatalf("run %d %s %+v:\n fold  %s %q (%s) at %d (%v)\n whole %s %q (%s) at %d (%v)", run, typ, payload,
					got.Status, got.Reason, got.Code, got.Version, err1, want.Status, want.Reason, want.Code, want.Version, err2)
			}
			if snapEvery > 0 && rng.IntN(snapEvery) == 0 {
				if _, err := snapshot(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
		}
		send(bankaccount.OpenAccount, struct{}{})
		for step := range 80 {
			if step == 60 {
				send(bankaccount.CloseAccount, struct{}{})
			}
			amount := int64(rng.IntN(400) - 250)
			if amount == 0 {
				amount = 1
			}
			refund := amount > 0 && rng.IntN(5) == 0
			send(bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: fmt.Sprintf("d%d", rng.IntN(50)), Amount: amount, Refund: refund})
		}
		p1, err1 := eventstore.NewFacet(eventstore.FacetConfig[bankaccount.Account]{Store: foldStore, AggregateType: bankaccount.AggregateType, Processor: bankaccount.UniqueDescriptions()})
		p2, err2 := eventstore.NewFacet(eventstore.FacetConfig[bankaccount.Account]{Store: wholeStore, AggregateType: bankaccount.AggregateType, Processor: uniqueDescriptionsWholeLog()})
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		s1, err1 := p1.Load(ctx, id)
		s2, err2 := p2.Load(ctx, id)
		if err1 != nil || err2 != nil || s1.Item != s2.Item || s1.Seq != s2.Seq {
			t.Fatalf("run %d: Load %+v (%v) vs whole log %+v (%v)", run, s1, err1, s2, err2)
		}
	}
}

// TestDescriptionsSnapshotSize: the snapshot of an account with 10,000
// descriptions of 15 bytes fits DynamoDB's 400 KB item (memstore checks
// the same limit); with descriptions of 40 bytes it does not, the
// snapshot is refused with ErrItemTooLarge, and commands still answer
// right, folding the events since the older snapshot that fit.
func TestDescriptionsSnapshotSize(t *testing.T) {
	ctx := context.Background()
	d := bankaccount.UniqueDescriptionsDomain()
	for _, tc := range []struct {
		name string
		desc func(i int) string
		fits bool
	}{
		{"15-byte descriptions", func(i int) string { return fmt.Sprintf("invoice %07d", i) }, true},
		{"40-byte descriptions", func(i int) string { return fmt.Sprintf("payment 0f8e2c1a-4b6d-4e3a-9c77-%08d", i) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newMemstore(t)
			id := "acc-big"
			buildAccount(t, s, id, 5_000, tc.desc)
			snapshot, err := d.NewSnapshot(s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if seq, err := snapshot(ctx, id); err != nil || seq != 5_000 {
				t.Fatalf("snapshot at 5,000: %d, %v", seq, err)
			}
			transact(t, s, id, 5_000, 10_000, tc.desc)
			seq, err := snapshot(ctx, id)
			stored, serr := s.Snapshot(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: id})
			if serr != nil {
				t.Fatal(serr)
			}
			if tc.fits {
				if err != nil || seq != 10_000 || stored.Seq != 10_000 {
					t.Fatalf("snapshot at 10,000: %d, %v", seq, err)
				}
				t.Logf("snapshot of 10,000 events: %d bytes of JSON (limit %d for the item)", len(stored.Data), dynamodb.MaxItemSize)
			} else {
				if !errors.Is(err, eventstore.ErrItemTooLarge) || stored.Seq != 5_000 {
					t.Fatalf("snapshot at 10,000: %v, stored at %d; want ErrItemTooLarge and the one at 5,000", err, stored.Seq)
				}
				t.Logf("refused: %v", err)
			}
			h := handlers(t, d, s)[bankaccount.RecordTransaction]
			for _, c := range []struct {
				desc   string
				status commands.Status
			}{{tc.desc(3), commands.StatusRejected}, {tc.desc(9_999), commands.StatusRejected}, {"new", commands.StatusAccepted}} {
				res, err := h.Handle(ctx, commands.New(bankaccount.RecordTransaction, bankaccount.AggregateType, id, []byte(fmt.Sprintf(`{"desc":%q,"amount":1}`, c.desc))))
				if err != nil || res.Status != c.status || c.status == commands.StatusRejected && !errors.Is(res.Err(), bankaccount.ErrDuplicateDesc) {
					t.Fatalf("%q: %+v, %v; want %s", c.desc, res, err, c.status)
				}
			}
		})
	}
}
