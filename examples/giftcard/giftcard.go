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

// Event definitions: the type of each event's payload, checked by the
// compiler wherever an event is made (New) or applied (OnEvent).
var (
	CardIssuedEvent    = eventstore.DefineEvent[IssuedData](CardIssued)
	CardRedeemedEvent  = eventstore.DefineEvent[RedeemedData](CardRedeemed)
	CardCancelledEvent = eventstore.DefineEvent[CancelledData](CardCancelled)
)

// Command types and their definitions.
const (
	IssueCard  = "IssueCard"  // payload IssuedData
	RedeemCard = "RedeemCard" // payload RedeemedData
	CancelCard = "CancelCard" // payload CancelledData
)

var (
	IssueCardCommand  = commands.DefineCommand[IssuedData](IssueCard)
	RedeemCardCommand = commands.DefineCommand[RedeemedData](RedeemCard)
	CancelCardCommand = commands.DefineCommand[CancelledData](CancelCard)
)

// Refusal codes: what callers and tests match with errors.Is.
const (
	ErrIssued              eventstore.Code = "giftcard.issued"               // issuing a card twice
	ErrNotIssued           eventstore.Code = "giftcard.not_issued"           // a card never issued
	ErrCancelled           eventstore.Code = "giftcard.cancelled"            // redeeming or cancelling a cancelled card
	ErrInsufficientBalance eventstore.Code = "giftcard.insufficient_balance" // redeeming more than is left
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
	return eventstore.NewProcessor(func() Card { return Card{} },
		eventstore.OnEvent(CardIssuedEvent, func(c Card, ev IssuedData, _ *eventstore.Outbox) (Card, error) {
			if c.Issued {
				return c, eventstore.RejectWith(ErrIssued, "card already issued")
			}
			return Card{Issued: true, Balance: ev.Amount}, nil
		}),
		eventstore.OnEventEnvelope(CardRedeemedEvent, redeemed),
		eventstore.OnEvent(CardCancelledEvent, func(c Card, _ CancelledData, _ *eventstore.Outbox) (Card, error) {
			if c.Cancelled {
				return c, eventstore.RejectWith(ErrCancelled, "card already cancelled")
			}
			c.Cancelled = true
			return c, nil
		}),
	)
}

// redeemed takes a redemption off the balance; it needs the envelope for
// the card's id in the outbound event.
func redeemed(c Card, env eventstore.Envelope, ev RedeemedData, out *eventstore.Outbox) (Card, error) {
	switch {
	case c.Cancelled:
		return c, eventstore.RejectWith(ErrCancelled, "card cancelled")
	case ev.Amount > c.Balance:
		return c, eventstore.RejectWith(ErrInsufficientBalance, "insufficient balance: %d left, %d asked", c.Balance, ev.Amount)
	}
	c.Balance -= ev.Amount
	if c.Balance == 0 {
		out.Publish(OutboundCardSpent, SpentData{Card: env.AggregateID, LastOrder: ev.Order})
	}
	return c, nil
}

// Domain describes the gift card's write model.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(),
		commands.OnCommand(IssueCardCommand, decideIssue),
		commands.OnCommand(RedeemCardCommand, decideRedeem),
		commands.OnCommand(CancelCardCommand, decideCancel),
	)
}

func decideIssue(cur eventstore.State[Card], cmd commands.Command, d IssuedData) ([]eventstore.NewEvent, error) {
	if d.Amount <= 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: fmt.Sprintf("is %d, want > 0", d.Amount)}
	}
	if cur.Item.Issued {
		return nil, commands.ConflictWith(ErrIssued, "card %s is already issued", cmd.AggregateID)
	}
	return []eventstore.NewEvent{CardIssuedEvent.New(d)}, nil
}

func decideRedeem(cur eventstore.State[Card], cmd commands.Command, d RedeemedData) ([]eventstore.NewEvent, error) {
	if d.Amount <= 0 || d.Order == "" {
		return nil, &eventstore.ValidationError{Field: "payload", Reason: "a redemption needs an amount > 0 and an order"}
	}
	if !cur.Item.Issued {
		return nil, commands.NotFoundWith(ErrNotIssued, "card %s was never issued", cmd.AggregateID)
	}
	return []eventstore.NewEvent{CardRedeemedEvent.New(d)}, nil // the rules check the balance
}

func decideCancel(cur eventstore.State[Card], cmd commands.Command, d CancelledData) ([]eventstore.NewEvent, error) {
	if !cur.Item.Issued {
		return nil, commands.NotFoundWith(ErrNotIssued, "card %s was never issued", cmd.AggregateID)
	}
	return []eventstore.NewEvent{CardCancelledEvent.New(d)}, nil
}
