package giftcard_test

import (
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/examples/giftcard"
	"github.com/eventpipe/eventpipe/testkit"
)

// The gift card domain and its search model, tested with the kit: no
// DynamoDB, Kafka, Postgres or Elasticsearch runs.

func issued(amount int64) eventstore.NewEvent {
	return giftcard.CardIssuedEvent.New(giftcard.IssuedData{Amount: amount})
}

func redeemed(amount int64, order string) eventstore.NewEvent {
	return giftcard.CardRedeemedEvent.New(giftcard.RedeemedData{Amount: amount, Order: order})
}

func TestIssueACardOnce(t *testing.T) {
	f := testkit.NewDomainFixture(t, giftcard.Domain())
	f.When("gc-1", giftcard.IssueCard, giftcard.IssuedData{Amount: 5000}).
		ThenEvents(issued(5000)).
		ThenState("gc-1", giftcard.Card{Issued: true, Balance: 5000})
	f.When("gc-1", giftcard.IssueCard, giftcard.IssuedData{Amount: 100}).
		ThenRefusedWith(commands.StatusConflict, giftcard.ErrIssued)
	f.When("gc-2", giftcard.IssueCard, giftcard.IssuedData{Amount: 0}).
		ThenInvalid("amount")
}

func TestRedeemUpToTheBalanceAndPublishCardSpent(t *testing.T) {
	f := testkit.NewDomainFixture(t, giftcard.Domain())
	f.Given("gc-1", issued(5000), redeemed(3000, "o1"))
	f.When("gc-1", giftcard.RedeemCard, giftcard.RedeemedData{Amount: 2001, Order: "o2"}).
		ThenRefusedWith(commands.StatusRejected, giftcard.ErrInsufficientBalance)
	f.When("gc-1", giftcard.RedeemCard, giftcard.RedeemedData{Amount: 1500, Order: "o2"}).
		ThenEvents(redeemed(1500, "o2")).
		ThenNoOutbound()
	f.When("gc-1", giftcard.RedeemCard, giftcard.RedeemedData{Amount: 500, Order: "o3"}).
		ThenEvents(redeemed(500, "o3")).
		ThenOutbound(testkit.Outbound(giftcard.OutboundCardSpent, giftcard.SpentData{Card: "gc-1", LastOrder: "o3"}))
}

func TestACancelledOrUnknownCardCannotBeRedeemed(t *testing.T) {
	f := testkit.NewDomainFixture(t, giftcard.Domain())
	f.When("gc-9", giftcard.RedeemCard, giftcard.RedeemedData{Amount: 1, Order: "o1"}).
		ThenRefusedWith(commands.StatusNotFound, giftcard.ErrNotIssued)
	f.Given("gc-1", issued(5000), giftcard.CardCancelledEvent.New(giftcard.CancelledData{Reason: "lost"}))
	f.When("gc-1", giftcard.RedeemCard, giftcard.RedeemedData{Amount: 1, Order: "o1"}).
		ThenRefusedWith(commands.StatusRejected, giftcard.ErrCancelled)
	f.When("gc-1", giftcard.CancelCard, `{}`).
		ThenRefusedWith(commands.StatusRejected, giftcard.ErrCancelled)
}

func TestTheSearchDocumentFollowsTheCard(t *testing.T) {
	// The events the real handlers appended, folded by the search model.
	d := testkit.NewDomainFixture(t, giftcard.Domain())
	d.When("gc-1", giftcard.IssueCard, giftcard.IssuedData{Amount: 5000}).ThenAccepted()
	d.When("gc-1", giftcard.RedeemCard, giftcard.RedeemedData{Amount: 5000, Order: "o1"}).ThenAccepted()

	testkit.NewFoldFixture(t, giftcard.Search{}).
		GivenEnvelopes(d.Log("gc-1")...).
		Given("gc-2", issued(100), giftcard.CardCancelledEvent.New(giftcard.CancelledData{})).
		ThenDocuments(map[string]any{
			"gc-1": giftcard.Doc{ID: "gc-1", Issued: 5000, Balance: 0, Usable: false, Orders: 1, Sequence: 2},
			"gc-2": `{"id":"gc-2","issued":100,"balance":100,"usable":false,"orders":0,"sequence":2}`,
		})
}
