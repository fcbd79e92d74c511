package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

func event(t *testing.T, seq int64, typ string, payload any) eventstore.Envelope {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return eventstore.Envelope{
		EventID: eventstore.NewEventID(time.Now()), AggregateType: order.AggregateType, AggregateID: "o1",
		Sequence: seq, EventType: typ, SchemaVersion: 1, OccurredAt: time.Now(), Payload: b,
	}
}

// TestOrderRulesFollowTheLifecycleAndBoundRefunds applies the order rules
// without a store: the lifecycle placed → paid → shipped → delivered, a
// payment that must match the total, refunds up to what was paid (each
// publishing orderRefunded), and every out-of-order event refused.
func TestOrderRulesFollowTheLifecycleAndBoundRefunds(t *testing.T) {
	p := order.Processor()
	st, out, err := p.Apply(p.Initial(), []eventstore.Envelope{
		event(t, 1, order.OrderPlaced, order.OrderPlacedData{Customer: "c1", Total: 4500}),
		event(t, 2, order.PaymentProcessed, order.PaymentProcessedData{Amount: 4500}),
		event(t, 3, order.OrderShipped, order.OrderShippedData{TrackingNumber: "Z1"}),
		event(t, 4, order.OrderDelivered, struct{}{}),
		event(t, 5, order.OrderRefunded, order.OrderRefundedData{Amount: 1000, Reason: "dented"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := order.Order{Status: order.StatusDelivered, Customer: "c1", Total: 4500, Paid: 4500, Refunded: 1000, TrackingNumber: "Z1"}
	if st != want {
		t.Fatalf("state %+v, want %+v", st, want)
	}
	if len(out) != 1 || out[0].Name != order.OutboundOrderRefunded || out[0].Seq != 5 || string(out[0].Payload) != `{"amount":1000,"reason":"dented"}` {
		t.Fatalf("outbound %+v, want one orderRefunded from sequence 5", out)
	}
	full, _, err := p.Apply(st, []eventstore.Envelope{event(t, 6, order.OrderRefunded, order.OrderRefundedData{Amount: 3500})})
	if err != nil || full.Status != order.StatusRefunded || full.Refunded != 4500 {
		t.Fatalf("refund of the rest: %+v, %v; want status refunded", full, err)
	}

	placed, _, _ := p.Apply(p.Initial(), []eventstore.Envelope{event(t, 1, order.OrderPlaced, order.OrderPlacedData{Customer: "c1", Total: 4500})})
	refused := map[string]struct {
		from order.Order
		ev   eventstore.Envelope
	}{
		"paid before placed":     {p.Initial(), event(t, 1, order.PaymentProcessed, order.PaymentProcessedData{Amount: 4500})},
		"placed twice":           {placed, event(t, 2, order.OrderPlaced, order.OrderPlacedData{Total: 1})},
		"payment not the total":  {placed, event(t, 2, order.PaymentProcessed, order.PaymentProcessedData{Amount: 4499})},
		"shipped before paid":    {placed, event(t, 2, order.OrderShipped, order.OrderShippedData{TrackingNumber: "Z"})},
		"delivered before ship":  {placed, event(t, 2, order.OrderDelivered, struct{}{})},
		"refund before payment":  {placed, event(t, 2, order.OrderRefunded, order.OrderRefundedData{Amount: 1})},
		"refund beyond the paid": {full, event(t, 7, order.OrderRefunded, order.OrderRefundedData{Amount: 1})},
		"refund of nothing":      {st, event(t, 6, order.OrderRefunded, order.OrderRefundedData{Amount: 0})},
	}
	for name, tc := range refused {
		_, _, err := p.Apply(tc.from, []eventstore.Envelope{tc.ev})
		var rej *eventstore.RuleRejection
		if !errors.As(err, &rej) || rej.EventType != tc.ev.EventType {
			t.Errorf("%s: %v, want a RuleRejection of %s", name, err, tc.ev.EventType)
		}
	}
}

// TestOrderCommandsAnswerEveryOutcome runs the order domain's handlers on
// the real store: the lifecycle is accepted, a command on an order never
// placed is not_found, a rule's refusal is rejected, a second PlaceOrder
// is rejected, and bad input (a non-positive amount, an unknown field) is
// invalid.
func TestOrderCommandsAnswerEveryOutcome(t *testing.T) {
	ctx := context.Background()
	client := testenv.DynamoDB(t)
	table := testenv.UniqueName(t, "orders")
	if err := migrations.CreateEventsTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &ddb.DeleteTableInput{TableName: aws.String(table)})
	})
	s, err := store.New(store.Config{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := order.Domain().NewHandlers(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := &commands.Registry{}
	if err := reg.Register(hs...); err != nil {
		t.Fatal(err)
	}
	run := func(typ, id, payload string) (commands.Result, error) {
		h, ok := reg.Lookup(typ)
		if !ok {
			t.Fatalf("no handler for %s", typ)
		}
		return h.Handle(ctx, commands.New(typ, order.AggregateType, id, json.RawMessage(payload)))
	}
	steps := []struct {
		name, typ, id, payload string
		want                   commands.Status
		version                int64
	}{
		{"pay before placing", order.ProcessPayment, "o1", `{"amount":4500}`, commands.StatusNotFound, 0},
		{"place", order.PlaceOrder, "o1", `{"customer":"c1","total":4500}`, commands.StatusAccepted, 1},
		{"place again", order.PlaceOrder, "o1", `{"customer":"c1","total":10}`, commands.StatusRejected, 1},
		{"underpay", order.ProcessPayment, "o1", `{"amount":4000}`, commands.StatusRejected, 1},
		{"pay", order.ProcessPayment, "o1", `{"amount":4500}`, commands.StatusAccepted, 2},
		{"ship", order.ShipOrder, "o1", `{"trackingNumber":"Z1"}`, commands.StatusAccepted, 3},
		{"deliver", order.DeliverOrder, "o1", `{}`, commands.StatusAccepted, 4},
		{"refund too much", order.RefundOrder, "o1", `{"amount":5000}`, commands.StatusRejected, 4},
		{"refund", order.RefundOrder, "o1", `{"amount":4500,"reason":"lost"}`, commands.StatusAccepted, 5},
		{"zero total", order.PlaceOrder, "o2", `{"customer":"c1","total":0}`, commands.StatusInvalid, 0},
		{"unknown field", order.PlaceOrder, "o2", `{"customer":"c1","total":5,"discount":1}`, commands.StatusInvalid, 0},
	}
	for _, st := range steps {
		res, err := run(st.typ, st.id, st.payload)
		var invalid *commands.InvalidError
		switch {
		case st.want == commands.StatusInvalid && !errors.As(err, &invalid):
			t.Errorf("%s: %+v, %v; want an InvalidError", st.name, res, err)
		case st.want != commands.StatusInvalid && err != nil:
			t.Errorf("%s: %v", st.name, err)
		case res.Status != st.want || res.Version != st.version:
			t.Errorf("%s: %s at version %d (%s), want %s at %d", st.name, res.Status, res.Version, res.Reason, st.want, st.version)
		}
	}
	facet, err := order.NewFacet(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := facet.Get(ctx, "o1")
	if err != nil || got.Item.Status != order.StatusRefunded || got.Item.TrackingNumber != "Z1" || got.Seq != 5 {
		t.Fatalf("order o1: %+v, %v", got, err)
	}
}
