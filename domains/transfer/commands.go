package transfer

import (
	"fmt"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Command types.
const (
	RequestTransfer    = "RequestTransfer"    // payload RequestedData
	CompleteTransfer   = "CompleteTransfer"   // payload {} (CompletedData)
	CompensateTransfer = "CompensateTransfer" // payload ReasonData
	FailTransfer       = "FailTransfer"       // payload ReasonData
)

// Domain describes the transfer write model: its events and its
// commands, each deciding against the transfer's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(), map[string]commands.Decide[Transfer]{
		RequestTransfer:    decideRequest,
		CompleteTransfer:   decideFinish[CompletedData](TransferCompleted),
		CompensateTransfer: decideFinish[ReasonData](TransferCompensated),
		FailTransfer:       decideFinish[ReasonData](TransferFailed),
	})
}

// NewFacet returns the transfer facet on store (reads of a transfer's
// STATE, appends that the rules check). upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Transfer], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Transfer]{Store: store, AggregateType: AggregateType, Processor: Processor(), Upcasters: upcasters})
}

// decideRequest requests a new transfer between two different accounts
// (each a usable aggregate id) for a positive amount.
func decideRequest(cur eventstore.State[Transfer], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var d RequestedData
	if err := cmd.DecodePayload(&d); err != nil {
		return nil, err
	}
	if err := eventstore.ValidateName("from", d.From); err != nil {
		return nil, err
	}
	if err := eventstore.ValidateName("to", d.To); err != nil {
		return nil, err
	}
	if d.From == d.To {
		return nil, &eventstore.ValidationError{Field: "to", Reason: fmt.Sprintf("%q is also the account the money comes from", d.To)}
	}
	if d.Amount <= 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: fmt.Sprintf("is %d, want > 0", d.Amount)}
	}
	if cur.Item.Status != StatusNone {
		return nil, commands.Conflict("transfer %s already exists", cmd.AggregateID)
	}
	return []eventstore.NewEvent{eventstore.Event(TransferRequested, d)}, nil
}

// decideFinish records an outcome (eventType, with the command's payload
// D) of a transfer that was requested and is not finished yet.
func decideFinish[D any](eventType string) commands.Decide[Transfer] {
	return func(cur eventstore.State[Transfer], cmd commands.Command) ([]eventstore.NewEvent, error) {
		var d D
		if err := cmd.DecodePayload(&d); err != nil {
			return nil, err
		}
		switch {
		case cur.Item.Status == StatusNone:
			return nil, commands.NotFound("transfer %s does not exist", cmd.AggregateID)
		case cur.Item.Status.Finished():
			return nil, commands.Conflict("transfer %s is already %s", cmd.AggregateID, cur.Item.Status)
		}
		return []eventstore.NewEvent{eventstore.Event(eventType, d)}, nil
	}
}
