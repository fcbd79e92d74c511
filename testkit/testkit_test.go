package testkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
	"github.com/eventpipe/eventpipe/testkit"
)

// spy is a testing.TB that records the fixtures' failures instead of
// failing the test; a fatal one stops the check with errFatal.
type spy struct {
	testing.TB
	errs  []string
	fatal string
}

var errFatal = errors.New("fatal")

func (s *spy) Helper()                        {}
func (s *spy) Context() context.Context       { return context.Background() }
func (s *spy) Errorf(format string, a ...any) { s.errs = append(s.errs, fmt.Sprintf(format, a...)) }
func (s *spy) Fatalf(format string, a ...any) {
	s.fatal = fmt.Sprintf(format, a...)
	panic(errFatal)
}
func (s *spy) Fatal(a ...any) {
	s.fatal = fmt.Sprint(a...)
	panic(errFatal)
}

// check runs fn with a spy and returns it.
func check(t *testing.T, fn func(tb testing.TB)) *spy {
	t.Helper()
	s := &spy{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != errFatal {
				panic(r)
			}
		}()
		fn(s)
	}()
	return s
}

// wantFailure checks that s recorded exactly one failure (fatal or not)
// holding every part.
func wantFailure(t *testing.T, s *spy, fatal bool, parts ...string) {
	t.Helper()
	msg := s.fatal
	if !fatal {
		if len(s.errs) != 1 || s.fatal != "" {
			t.Fatalf("want one failure, got %d (%q), fatal %q", len(s.errs), s.errs, s.fatal)
		}
		msg = s.errs[0]
	} else if msg == "" || len(s.errs) > 0 {
		t.Fatalf("want a fatal failure, got fatal %q, errors %q", s.fatal, s.errs)
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("failure message lacks %q:\n%s", p, msg)
		}
	}
}

func TestDomainFixtureShowsADiffOfTheEvents(t *testing.T) {
	s := check(t, func(tb testing.TB) {
		testkit.NewDomainFixture(tb, bankaccount.Domain()).
			Given("acc-1", bankaccount.Opened("acc-1")).
			When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -50}).
			ThenEvents(bankaccount.Transacted("rent", -40))
	})
	wantFailure(t, s, false,
		`when RecordTransaction on bankaccount/acc-1 with {"desc":"rent","amount":-50}`,
		"answered accepted at version 2",
		"events differ (- expected, + actual):",
		"  event 1: TransactionAccepted\n",
		`-   "amount": -40,`+"\n"+`+   "amount": -50,`)
}

func TestDomainFixtureReportsAnAnswerOtherThanTheOneExpected(t *testing.T) {
	s := check(t, func(tb testing.TB) {
		testkit.NewDomainFixture(tb, bankaccount.Domain()).
			When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "x", Amount: 5}).
			ThenEvents(bankaccount.Transacted("x", 5))
	})
	wantFailure(t, s, false, "answered not_found: account acc-1 does not exist", "want accepted with events:", `"desc": "x"`)

	s = check(t, func(tb testing.TB) {
		testkit.NewDomainFixture(tb, bankaccount.Domain()).
			Given("acc-1", bankaccount.Opened("acc-1")).
			When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "x", Amount: -5000}).
			ThenRejected("account closed")
	})
	wantFailure(t, s, false, "answered rejected: insufficient funds", `want rejected with a reason containing "account closed"`)
}

// TestDomainFixtureMatchesRefusalsByCodeAndField: ThenRefusedWith
// passes on the refusal's code and fails, naming both, on another;
// ThenInvalid passes on the ValidationError's field and fails on another.
func TestDomainFixtureMatchesRefusalsByCodeAndField(t *testing.T) {
	f := testkit.NewDomainFixture(t, bankaccount.Domain()).Given("acc-1", bankaccount.Opened("acc-1"))
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "x", Amount: -5000}).
		ThenRefusedWith(commands.StatusRejected, bankaccount.ErrInsufficientFunds)
	var refusal *commands.RefusalError
	if !errors.As(f.Refusal(), &refusal) || refusal.Code != bankaccount.ErrInsufficientFunds {
		t.Fatalf("Refusal = %v, want a RefusalError with the code", f.Refusal())
	}
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "x", Amount: 0}).ThenInvalid("amount")

	s := check(t, func(tb testing.TB) {
		testkit.NewDomainFixture(tb, bankaccount.Domain()).
			Given("acc-1", bankaccount.Opened("acc-1")).
			When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "x", Amount: -5000}).
			ThenRefusedWith(commands.StatusRejected, bankaccount.ErrClosed)
	})
	wantFailure(t, s, false, "answered rejected: insufficient funds", `want rejected matching "bankaccount.closed" (errors.Is)`, "bankaccount.insufficient_funds")

	s = check(t, func(tb testing.TB) {
		testkit.NewDomainFixture(tb, bankaccount.Domain()).
			Given("acc-1", bankaccount.Opened("acc-1")).
			When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "x", Amount: 0}).
			ThenInvalid("desc")
	})
	wantFailure(t, s, false, "answered invalid: invalid amount: is 0", `want invalid with an *eventstore.ValidationError on "desc"`)
}

func TestDomainFixtureShowsTheOutboundEventsThatDiffer(t *testing.T) {
	s := check(t, func(tb testing.TB) {
		testkit.NewDomainFixture(tb, bankaccount.Domain()).
			Given("acc-1", bankaccount.Opened("acc-1")).
			When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "x", Amount: -5}).
			ThenNoOutbound()
	})
	wantFailure(t, s, false, "outbound events differ", "- (none)", "+ outbound 1: accountOverdrawn", `+   "accountId": "acc-1"`)
}

func TestDomainFixtureRefusesAHistoryTheRulesRefuse(t *testing.T) {
	s := check(t, func(tb testing.TB) {
		testkit.NewDomainFixture(tb, bankaccount.Domain()).Given("acc-1", bankaccount.Transacted("x", -5000))
	})
	wantFailure(t, s, true, "Given bankaccount/acc-1: the domain's rules refuse the given history", "insufficient funds", "event 1: TransactionAccepted")

	s = check(t, func(tb testing.TB) {
		testkit.NewDomainFixture(tb, bankaccount.Domain()).Given("acc-1", eventstore.Event("AccountFrozen", struct{}{}))
	})
	wantFailure(t, s, true, "Given bankaccount/acc-1", `"AccountFrozen" is not a known event type`)
}

func TestDomainFixtureGivenHistoryIsWhatTheHandlersLoad(t *testing.T) {
	f := testkit.NewDomainFixture(t, bankaccount.Domain())
	f.Given("acc-1", bankaccount.Opened("acc-1"), bankaccount.Transacted("a", 10)).
		Given("acc-1", bankaccount.Transacted("b", 5)).
		ThenState("acc-1", bankaccount.Account{ID: "acc-1", Balance: 15, MinimumBalance: bankaccount.DefaultMinimumBalance})
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "c", Amount: 1}).ThenAccepted()
	if r := f.Result(); r.Version != 4 || len(r.EventIDs) != 1 {
		t.Errorf("result %+v, want version 4 with one event", r)
	}
	if log := f.Log("acc-1"); len(log) != 4 || log[3].EventID != f.Events()[0].EventID {
		t.Errorf("log of %d events, the last %v; want 4 ending with the command's", len(log), log[len(log)-1])
	}
}

func TestDomainFixtureChecksNeedAWhen(t *testing.T) {
	s := check(t, func(tb testing.TB) { testkit.NewDomainFixture(tb, todo.Domain()).ThenAccepted() })
	wantFailure(t, s, true, "a Then check before any When")
}

// abortless is a saga without an Abort hook that fails on a "poison"
// event.
func abortless() sagas.Saga[map[string]int] {
	return sagas.Saga[map[string]int]{
		Name:   "count",
		Events: []string{todo.AggregateType},
		Route: func(in sagas.Input) (string, bool) {
			return in.Event.AggregateID, in.Event.EventType == todo.TodoCreated
		},
		Initial: func(string) map[string]int { return map[string]int{} },
		Handle: func(s map[string]int, in sagas.Input, fx *sagas.Effects) (map[string]int, error) {
			if in.Event.EventType == "Poison" {
				return s, &eventstore.ValidationError{Field: "event", Reason: "poison"}
			}
			s[in.Event.EventType]++
			if s[in.Event.EventType] == 1 {
				fx.After("remind", time.Hour)
			} else {
				fx.Clear("remind")
			}
			return s, nil
		},
	}
}

func TestSagaFixtureKeepsStateTimeoutsAndAbortsAsTheRunner(t *testing.T) {
	f := testkit.NewSagaFixture(t, abortless())
	created := testkit.SagaEvent(todo.AggregateType, "t1", todo.TodoCreated, todo.TodoData{Title: "a"})
	f.When(created).ThenScheduled("remind", time.Hour).ThenPending("remind").ThenState(`{"TodoCreated":1}`)
	f.When(testkit.SagaEvent(todo.AggregateType, "t1", todo.TodoUpdated, `{}`)).ThenPending("remind")
	f.When(testkit.SagaEvent(todo.AggregateType, "t1", todo.TodoUpdated, `{}`)).ThenPending().ThenState(`{"TodoCreated":1,"TodoUpdated":2}`)
	f.When(testkit.SagaEvent(todo.AggregateType, "t1", "Poison", `{}`)).ThenFails("poison", true)
	f.When(testkit.SagaEvent(todo.AggregateType, "t2", todo.TodoUpdated, `{}`)).ThenSkipped() // may not start t2
	// Without an Abort hook an abort finishes the instance at once.
	f.When(testkit.Abort("ops", "stop")).ThenNoCommands().ThenFinished(sagas.OutcomeAborted)
	f.When(created).ThenSkipped()
}

func TestSagaFixtureShowsADiffOfTheCommands(t *testing.T) {
	saga := sagas.Saga[struct{}]{
		Name:    "bonus",
		Events:  []string{bankaccount.AggregateType},
		Route:   func(in sagas.Input) (string, bool) { return in.Event.AggregateID, true },
		Initial: func(string) struct{} { return struct{}{} },
		Handle: func(s struct{}, in sagas.Input, fx *sagas.Effects) (struct{}, error) {
			if in.Kind == sagas.KindEvent {
				cmd, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, fx.Instance(), bankaccount.TransactionAcceptedData{Desc: "bonus", Amount: 10})
				fx.Send("bonus", cmd)
				return s, err
			}
			return s, nil
		},
	}
	opened := testkit.SagaEvent(bankaccount.AggregateType, "acc-1", bankaccount.AccountOpened, bankaccount.AccountOpenedData{ID: "acc-1"})
	s := check(t, func(tb testing.TB) {
		testkit.NewSagaFixture(tb, saga).When(opened).
			ThenCommands(testkit.Sent("bonus", bankaccount.RecordTransaction, bankaccount.AggregateType, "acc-1", bankaccount.TransactionAcceptedData{Desc: "bonus", Amount: 20}))
	})
	wantFailure(t, s, false, "saga bonus: when event AccountOpened of bankaccount/acc-1 (instance acc-1)", "commands sent differ",
		"  step bonus: RecordTransaction to bankaccount/acc-1", `-   "amount": 20,`, `+   "amount": 10,`)

	s = check(t, func(tb testing.TB) {
		testkit.NewSagaFixture(tb, saga).Given(opened).When(testkit.Fire("deadline"))
	})
	wantFailure(t, s, true, "timeout deadline is not pending on instance acc-1 (pending: none)")

	s = check(t, func(tb testing.TB) {
		testkit.NewSagaFixture(tb, saga).Given(opened).When(testkit.Accepted("credit"))
	})
	wantFailure(t, s, true, "instance acc-1 sent no command at step credit (its steps: bonus)")

	s = check(t, func(tb testing.TB) {
		testkit.NewSagaFixture(tb, saga).When(opened).ThenFinished("paid")
	})
	wantFailure(t, s, false, "want finished paid, got the instance runs on")
}

func TestFoldFixtureShowsADiffOfTheDocument(t *testing.T) {
	s := check(t, func(tb testing.TB) {
		testkit.NewFoldFixture(tb, searchmodels.TodoSearch{}).
			Given("t1", todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "buy milk"}})).
			ThenDocument("t1", searchmodels.TodoDoc{ID: "t1", Title: "buy oat milk", Sequence: 1, CreatedAt: testkit.Epoch(), UpdatedAt: testkit.Epoch()})
	})
	wantFailure(t, s, false, "search model todos-search: document t1 differ", `-   "title": "buy oat milk",`, `+   "title": "buy milk",`, `  "sequence": 1,`)

	s = check(t, func(tb testing.TB) {
		testkit.NewFoldFixture(tb, searchmodels.TodoSearch{}).ThenDocument("t9", `{}`)
	})
	wantFailure(t, s, false, "no document t9 (documents: none)")
}

func TestDomainFixtureReadsOldGivenEventsThroughTheUpcasters(t *testing.T) {
	var up eventstore.Upcasters
	up.MustRegister(todo.TodoCreated, 1, func(p json.RawMessage) (json.RawMessage, error) {
		var old struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(p, &old); err != nil {
			return nil, err
		}
		return json.Marshal(todo.TodoData{Title: old.Name})
	})
	f := testkit.NewDomainFixture(t, todo.Domain(), testkit.WithUpcasters(&up))
	f.Given("t1", eventstore.NewEvent{Type: todo.TodoCreated, SchemaVersion: 1, Payload: json.RawMessage(`{"name":"buy milk"}`)}).
		ThenState("t1", todo.Todo{Title: "buy milk", Exists: true})
	f.When("t2", todo.CreateTodo, todo.TodoData{Title: "new"}).ThenEvents(todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "new"}}))
	if v := f.Events()[0].SchemaVersion; v != 2 {
		t.Errorf("a new TodoCreated has schema version %d, want 2", v)
	}
	if log := f.Log("t1"); len(log) != 1 || log[0].SchemaVersion != 2 || string(log[0].Payload) != `{"title":"buy milk","message":"","completed":false}` {
		t.Errorf("t1 reads %+v, want its TodoCreated upcast to version 2", log)
	}
}

// BenchmarkDomainFixture measures one whole given/when/then on the
// in-memory store: a fixture works in a benchmark as in a test.
func BenchmarkDomainFixture(b *testing.B) {
	for b.Loop() {
		testkit.NewDomainFixture(b, bankaccount.Domain()).
			Given("acc-1", bankaccount.Opened("acc-1"), bankaccount.Transacted("salary", 100)).
			When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -150}).
			ThenEvents(bankaccount.Transacted("rent", -150))
	}
}

func TestSagaFixtureTakesOutboundEventsAndTheEventsADomainAppended(t *testing.T) {
	// An outbound event routed to its instance.
	alerts := sagas.Saga[int]{
		Name:     "alerts",
		Outbound: []string{bankaccount.OutboundAccountOverdrawn},
		Route:    func(in sagas.Input) (string, bool) { return in.Outbound.AggregateID, true },
		Initial:  func(string) int { return 0 },
		Handle: func(n int, in sagas.Input, fx *sagas.Effects) (int, error) {
			var d bankaccount.AccountOverdrawnData
			if err := json.Unmarshal(in.Outbound.Payload, &d); err != nil {
				return n, err
			}
			fx.Finish("alerted " + d.AccountID)
			return n + 1, nil
		},
	}
	testkit.NewSagaFixture(t, alerts).
		When(testkit.SagaOutbound(bankaccount.OutboundAccountOverdrawn, bankaccount.AggregateType, "acc-1", bankaccount.AccountOverdrawnData{AccountID: "acc-1"})).
		ThenFinished("alerted acc-1").
		ThenState(1)

	// The event a domain's handler appended, handed to a saga.
	d := testkit.NewDomainFixture(t, transfer.Domain())
	d.When("t1", transfer.RequestTransfer, transfer.RequestedData{From: "a", To: "b", Amount: 7}).ThenAccepted()
	testkit.NewSagaFixture(t, transfersaga.New(transfersaga.Config{})).
		When(testkit.SagaEnvelope(d.Events()[0])).
		ThenCommands(testkit.Sent(transfersaga.StepDebit, bankaccount.RecordTransaction, bankaccount.AggregateType, "a",
			bankaccount.TransactionAcceptedData{Desc: "transfer t1 to b", Amount: -7})).
		ThenScheduled("deadline", transfersaga.DefaultTimeout)
}
