package sagas_test

import (
	"fmt"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

// welcomeState is the example saga's state.
type welcomeState struct {
	Sent bool `json:"sent"`
}

// A saga that credits every new bank account with a welcome bonus, once,
// and gives up when the credit is not answered within a minute. Register
// it with eventpipe's Catalog.AddSaga and run it with `eventpipe consume
// welcome-saga` (or NewConsumers with SagaConsumer("welcome")).
func ExampleSaga() {
	welcome := sagas.Saga[welcomeState]{
		Name:   "welcome",
		Events: []string{bankaccount.AggregateType},
		Route: func(in sagas.Input) (string, bool) {
			if in.Event.EventType == bankaccount.AccountOpened {
				return in.Event.AggregateID, true // one instance per account
			}
			return "", false
		},
		Initial: func(string) welcomeState { return welcomeState{} },
		Handle: func(s welcomeState, in sagas.Input, fx *sagas.Effects) (welcomeState, error) {
			switch in.Kind {
			case sagas.KindEvent:
				cmd, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, fx.Instance(),
					bankaccount.TransactionAcceptedData{Desc: "welcome bonus", Amount: 10})
				if err != nil {
					return s, err
				}
				fx.Send("bonus", cmd) // command id welcome.<account>.bonus
				fx.After("give-up", time.Minute)
				s.Sent = true
			case sagas.KindTimeout:
				fx.Cancel("bonus", eventstore.Ref{Type: bankaccount.AggregateType, ID: fx.Instance()}, "no answer within a minute")
			case sagas.KindResult:
				fx.Finish(string(in.Result.Status)) // accepted, or the refusal (the cancel's, if it won)
			}
			return s, nil
		},
	}
	// A unit test calls Handle with NewEffects and reads what it decided.
	fx := sagas.NewEffects("welcome", "acc-1", "", time.Now())
	_, _ = welcome.Handle(welcomeState{}, sagas.Input{Kind: sagas.KindEvent, Event: eventstore.Envelope{EventType: bankaccount.AccountOpened, AggregateID: "acc-1"}}, fx)
	fmt.Println(welcome.Validate(), fx.Commands()[0].ID, len(fx.Timeouts()))
	// Output: <nil> welcome.acc-1.bonus 1
}
