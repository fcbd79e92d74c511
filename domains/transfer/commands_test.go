package transfer

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// decideOn runs the decision of cmdType on transfer tr (at version seq)
// for a command with payload, without a store.
func decideOn(t *testing.T, tr Transfer, seq int64, cmdType, payload string) ([]eventstore.NewEvent, error) {
	t.Helper()
	for _, d := range deciders() {
		if d.Definition().Name() == cmdType {
			return d.Decide(eventstore.State[Transfer]{Item: tr, Seq: seq}, commands.New(cmdType, AggregateType, "t1", json.RawMessage(payload)))
		}
	}
	t.Fatalf("no decision for %s", cmdType)
	return nil, nil
}

// TestDecideRequestValidatesAndRefusesASecondRequest: a valid request is
// one TransferRequested; bad input is a ValidationError on its field; a
// request of an existing transfer is a conflict.
func TestDecideRequestValidatesAndRefusesASecondRequest(t *testing.T) {
	evs, err := decideOn(t, Transfer{}, 0, RequestTransfer, `{"from":"a","to":"b","amount":250}`)
	if err != nil || len(evs) != 1 || evs[0].Type != TransferRequested || string(evs[0].Payload) != `{"from":"a","to":"b","amount":250}` {
		t.Fatalf("request: %+v, %v", evs, err)
	}
	for name, tc := range map[string]struct{ payload, field string }{
		"no from":        {`{"to":"b","amount":1}`, "from"},
		"no to":          {`{"from":"a","amount":1}`, "to"},
		"'#' in from":    {`{"from":"a#1","to":"b","amount":1}`, "from"},
		"'#' in to":      {`{"from":"a","to":"#b","amount":1}`, "to"},
		"same account":   {`{"from":"a","to":"a","amount":1}`, "to"},
		"zero amount":    {`{"from":"a","to":"b","amount":0}`, "amount"},
		"negative":       {`{"from":"a","to":"b","amount":-1}`, "amount"},
		"unknown field":  {`{"from":"a","to":"b","amount":1,"fee":2}`, "payload"},
		"not an object":  {`[]`, "payload"},
		"amount as text": {`{"from":"a","to":"b","amount":"1"}`, "payload"},
	} {
		_, err := decideOn(t, Transfer{}, 0, RequestTransfer, tc.payload)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want a ValidationError on %s", name, err, tc.field)
		}
	}
	existing := Transfer{ID: "t1", From: "a", To: "b", Amount: 250, Status: StatusRequested}
	_, err = decideOn(t, existing, 1, RequestTransfer, `{"from":"a","to":"b","amount":250}`)
	decision(t, "second request", err, commands.StatusConflict, ErrExists, "transfer t1 already exists")
}

// TestDecideOutcomesNeedARequestedUnfinishedTransfer: Complete,
// Compensate and Fail record their event on a requested transfer, are
// not found on a transfer never requested, and a conflict on a finished
// one, whatever its outcome.
func TestDecideOutcomesNeedARequestedUnfinishedTransfer(t *testing.T) {
	requested := Transfer{ID: "t1", From: "a", To: "b", Amount: 250, Status: StatusRequested}
	cases := []struct{ cmd, payload, event string }{
		{CompleteTransfer, `{}`, TransferCompleted},
		{CompensateTransfer, `{"reason":"credit rejected: account closed"}`, TransferCompensated},
		{FailTransfer, `{"reason":"debit rejected: insufficient funds"}`, TransferFailed},
	}
	for _, c := range cases {
		evs, err := decideOn(t, requested, 1, c.cmd, c.payload)
		if err != nil || len(evs) != 1 || evs[0].Type != c.event || string(evs[0].Payload) != c.payload {
			t.Errorf("%s: %+v, %v; want one %s with %s", c.cmd, evs, err, c.event, c.payload)
		}
		_, err = decideOn(t, Transfer{}, 0, c.cmd, c.payload)
		decision(t, c.cmd+" of an unknown transfer", err, commands.StatusNotFound, ErrNotFound, "transfer t1 does not exist")
		for _, s := range []Status{StatusCompleted, StatusCompensated, StatusFailed} {
			fin := requested
			fin.Status = s
			_, err := decideOn(t, fin, 2, c.cmd, c.payload)
			decision(t, c.cmd+" of a "+string(s)+" transfer", err, commands.StatusConflict, ErrFinished, "transfer t1 is already "+string(s))
		}
	}
	var ve *eventstore.ValidationError
	if _, err := decideOn(t, requested, 1, CompleteTransfer, `{"reason":"x"}`); !errors.As(err, &ve) || ve.Field != "payload" {
		t.Errorf("CompleteTransfer with a reason: %v, want a ValidationError on payload", err)
	}
}

func decision(t *testing.T, name string, err error, status commands.Status, code eventstore.Code, reason string) {
	t.Helper()
	var dec *commands.Decision
	if !errors.As(err, &dec) || dec.Status != status || !errors.Is(err, code) || dec.Reason != reason {
		t.Errorf("%s: %v, want %s (%s): %s", name, err, status, code, reason)
	}
}
