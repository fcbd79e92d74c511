package bankaccount

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// decideOn runs the decision of cmdType for a command with payload on
// account a (at version seq), without a store.
func decideOn(t *testing.T, a Account, seq int64, cmdType, payload string) ([]eventstore.NewEvent, error) {
	t.Helper()
	for _, d := range deciders() {
		if d.Definition().Name() == cmdType {
			return d.Decide(eventstore.State[Account]{Item: a, Seq: seq}, commands.New(cmdType, AggregateType, "acc-1", json.RawMessage(payload)))
		}
	}
	t.Fatalf("no decision for %s", cmdType)
	return nil, nil
}

// TestDecideCloseAndRefundAnswerEveryCase: closing an open account is one
// AccountClosed with its reason; closing an unknown account is not found,
// a closed one a conflict; a refund must be a credit; a transaction on a
// closed account is decided and left to the rules.
func TestDecideCloseAndRefundAnswerEveryCase(t *testing.T) {
	open := Account{ID: "acc-1", Balance: 120, MinimumBalance: DefaultMinimumBalance}
	closed := open
	closed.Closed = true

	evs, err := decideOn(t, open, 2, CloseAccount, `{"reason":"customer left"}`)
	if err != nil || len(evs) != 1 || evs[0].Type != AccountClosed || string(evs[0].Payload) != `{"reason":"customer left"}` {
		t.Fatalf("close an open account: %+v, %v", evs, err)
	}
	if evs, err := decideOn(t, open, 2, CloseAccount, `{}`); err != nil || len(evs) != 1 || string(evs[0].Payload) != `{}` {
		t.Fatalf("close without a reason: %+v, %v", evs, err)
	}
	evs, err = decideOn(t, closed, 3, RecordTransaction, `{"desc":"refund","amount":40,"refund":true}`)
	if err != nil || len(evs) != 1 || evs[0].Type != TransactionAccepted || string(evs[0].Payload) != `{"desc":"refund","amount":40,"refund":true}` {
		t.Fatalf("refund: %+v, %v", evs, err)
	}
	if evs, err := decideOn(t, closed, 3, RecordTransaction, `{"desc":"d","amount":-40}`); err != nil || len(evs) != 1 {
		t.Fatalf("a debit of a closed account is decided (the rules refuse it): %+v, %v", evs, err)
	}

	for name, tc := range map[string]struct {
		from    Account
		cmdType string
		payload string
		status  commands.Status // "" for a ValidationError on amount
		code    eventstore.Code
	}{
		"close an unknown account": {Initial(), CloseAccount, `{}`, commands.StatusNotFound, ErrNotFound},
		"close a closed account":   {closed, CloseAccount, `{"reason":"again"}`, commands.StatusConflict, ErrAlreadyClosed},
		"refund that is a debit":   {open, RecordTransaction, `{"desc":"r","amount":-5,"refund":true}`, "", ""},
		"refund of nothing":        {closed, RecordTransaction, `{"desc":"r","amount":0,"refund":true}`, "", ""},
	} {
		_, err := decideOn(t, tc.from, 3, tc.cmdType, tc.payload)
		var dec *commands.Decision
		var ve *eventstore.ValidationError
		switch {
		case tc.status == "" && !(errors.As(err, &ve) && ve.Field == "amount"):
			t.Errorf("%s: %v, want a ValidationError on amount", name, err)
		case tc.status != "" && !(errors.As(err, &dec) && dec.Status == tc.status && errors.Is(err, tc.code)):
			t.Errorf("%s: %v, want %s matching %s", name, err, tc.status, tc.code)
		}
	}
	var ve *eventstore.ValidationError
	if _, err := decideOn(t, open, 2, CloseAccount, `{"reason":"x","when":"now"}`); !errors.As(err, &ve) || ve.Field != "payload" {
		t.Errorf("unknown field in CloseAccount: %v, want a ValidationError on payload", err)
	}
}
