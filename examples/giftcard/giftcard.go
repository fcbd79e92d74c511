// Package giftcard is a user's own small domain, defined the way a team
// adopting eventpipe writes one, and tested with package testkit in
// giftcard_test.go without any service running.
//
// A gift card is issued with an amount, redeemed against orders until
// its balance is spent, and can be cancelled. A redemption beyond the
// balance or of a cancelled card is rejected; the redemption that spends
// the last of the balance publishes a cardSpent outbound event (say, for
// a mailer). Register it on eventpipe's catalogue with
// Catalog.AddDomain(giftcard.Domain()) to run it on the pipeline.
package giftcard

import (
	"fmt"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// AggregateType of gift cards.
const AggregateType = "giftcard"

// Event types.
const (
	CardIssued    = "CardIssued"    // payload IssuedData
	CardRedeemed  = "CardRedeemed"  // payload RedeemedData
	CardCancelled = "CardCancelled" // payload CancelledData
)

// Command types.
const (
	IssueCard  = "IssueCard"  // payload IssuedData
	RedeemCard = "RedeemCard" // payload RedeemedData
	CancelCard = "CancelCard" // payload CancelledData
)

// OutboundCardSpent is published (payload SpentData) by the redemption
// that takes the balance to 0.
const OutboundCardSpent = "cardSpent"

// Card is the state of one gift card. Amounts are in cents.
type Card struct {
	Issued    bool  `json:"issued"`
	Balance   int64 `json:"balance"`
	Cancelled bool  `json:"cancelled"`
}

// IssuedData is the payload of CardIssued and IssueCard.
type IssuedData struct {
	Amount int64 `json:"amount"`
}

// RedeemedData is the payload of CardRedeemed and RedeemCard.
type RedeemedData struct {
	Amount int64  `json:"amount"`
	Order  string `json:"order"`
}

// CancelledData is the payload of CardCancelled and CancelCard.
type CancelledData struct {
	Reason string `json:"reason,omitempty"`
}

// SpentData is the payload of the cardSpent outbound event.
type SpentData struct {
	Card      string `json:"card"`
	LastOrder string `json:"lastOrder"`
}

// Processor returns the gift card's rules; they are pure.
func Processor() eventstore.Processor[Card] {
	return eventstore.Processor[Card]{
		Initial: func() Card { return Card{} },
		Rules: map[string]eventstore.Rule[Card]{
			CardIssued: eventstore.On(func(c Card, ev IssuedData, _ *eventstore.Outbox) (Card, error) {
				if c.Issued {
					return c, eventstore.Reject("card already issued")
				}
				return Card{Issued: true, Balance: ev.Amount}, nil
			}),
			CardRedeemed: redeemed,
			CardCancelled: eventstore.On(func(c Card, _ CancelledData, _ *eventstore.Outbox) (Card, error) {
				if c.Cancelled {
					return c, eventstore.Reject("card already cancelled")
				}
				c.Cancelled = true
				return c, nil
			}),
		},
	}
}

// redeemed takes a redemption off the balance; it needs the envelope for
// the card's id in the outbound event.
func redeemed(c Card, env eventstore.Envelope, out *eventstore.Outbox) (Card, error) {
	var ev RedeemedData
	if err := env.DecodePayload(&ev); err != nil {
		return c, &eventstore.ValidationError{Field: "payload", Reason: err.Error()}
	}
	switch {
	case c.Cancelled:
		return c, eventstore.Reject("card cancelled")
	case ev.Amount > c.Balance:
		return c, eventstore.Rejectf("insufficient balance: %d left, %d asked", c.Balance, ev.Amount)
	}
	c.Balance -= ev.Amount
	if c.Balance == 0 {
		out.Publish(OutboundCardSpent, SpentData{Card: env.AggregateID, LastOrder: ev.Order})
	}
	return c, nil
}

// Domain describes the gift card's write model.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(), map[string]commands.Decide[Card]{
		IssueCard:  decideIssue,
		RedeemCard: decideRedeem,
		CancelCard: decideCancel,
	})
}

func decideIssue(cur eventstore.State[Card], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var d IssuedData
	if err := cmd.DecodePayload(&d); err != nil {
		return nil, err
	}
	if d.Amount <= 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: fmt.Sprintf("is %d, want > 0", d.Amount)}
	}
	if cur.Item.Issued {
		return nil, commands.Conflict("card %s is already issued", cmd.AggregateID)
	}
	return []eventstore.NewEvent{eventstore.Event(CardIssued, d)}, nil
}

func decideRedeem(cur eventstore.State[Card], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var d RedeemedData
	if err := cmd.DecodePayload(&d); err != nil {
		return nil, err
	}
	if d.Amount <= 0 || d.Order == "" {
		return nil, &eventstore.ValidationError{Field: "payload", Reason: "a redemption needs an amount > 0 and an order"}
	}
	if !cur.Item.Issued {
		return nil, commands.NotFound("card %s was never issued", cmd.AggregateID)
	}
	return []eventstore.NewEvent{eventstore.Event(CardRedeemed, d)}, nil // the rules check the balance
}

func decideCancel(cur eventstore.State[Card], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var d CancelledData
	if err := cmd.DecodePayload(&d); err != nil {
		return nil, err
	}
	if !cur.Item.Issued {
		return nil, commands.NotFound("card %s was never issued", cmd.AggregateID)
	}
	return []eventstore.NewEvent{eventstore.Event(CardCancelled, d)}, nil
}
