package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

type markedError struct{ permanent bool }

func (e markedError) Error() string   { return fmt.Sprintf("marked %v", e.permanent) }
func (e markedError) Permanent() bool { return e.permanent }

func TestIsPermanentSeparatesBadInputFromFailuresARetryCanFix(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("apply orders/1#2: %w", err) }
	cases := map[string]struct {
		err  error
		want bool
	}{
		"nil":                     {nil, false},
		"validation":              {wrap(&eventstore.ValidationError{Field: "title", Reason: "is empty"}), true},
		"decode":                  {wrap(&eventstore.DecodeError{What: "event envelope", Reason: "unexpected EOF"}), true},
		"item too large":          {wrap(fmt.Errorf("%w: 500000 bytes", eventstore.ErrItemTooLarge)), true},
		"too many items":          {wrap(eventstore.ErrTooManyItems), true},
		"transaction too large":   {wrap(eventstore.ErrTransactionTooLarge), true},
		"marked permanent":        {wrap(markedError{permanent: true}), true},
		"marked transient":        {wrap(markedError{permanent: false}), false},
		"connection refused":      {wrap(errors.New("dial tcp 127.0.0.1:8000: connection refused")), false},
		"deadline":                {wrap(context.DeadlineExceeded), false},
		"concurrency":             {wrap(&eventstore.ConcurrencyError{Expected: 1, Actual: 2}), false},
		"rule rejection (answer)": {wrap(eventstore.Reject("insufficient funds")), false},
	}
	for name, tc := range cases {
		if got := eventstore.IsPermanent(tc.err); got != tc.want {
			t.Errorf("%s: IsPermanent(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}

func TestDecodeStrictNamesWhatAndFieldAndRefusesExtras(t *testing.T) {
	type payload struct {
		Amount int64 `json:"amount"`
	}
	cases := map[string]struct{ in, field string }{
		"broken":        {`{"amount":`, ""},
		"unknown field": {`{"amount":1,"bogus":2}`, ""},
		"wrong type":    {`{"amount":"ten"}`, "amount"},
		"trailing":      {`{"amount":1} {}`, ""},
	}
	for name, tc := range cases {
		var p payload
		err := eventstore.DecodeStrict("Deposit payload", []byte(tc.in), &p)
		var de *eventstore.DecodeError
		if !errors.As(err, &de) || !errors.Is(err, eventstore.ErrMalformed) || de.What != "Deposit payload" || de.Field != tc.field {
			t.Errorf("%s: %v (%+v), want a *DecodeError on %q naming the payload", name, err, de, tc.field)
		}
	}
	var p payload
	if err := eventstore.DecodeStrict("Deposit payload", []byte(`{"amount":7}`), &p); err != nil || p.Amount != 7 {
		t.Fatalf("good payload: %v %+v", err, p)
	}
}
