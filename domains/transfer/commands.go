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

// Command definitions: each command type with the Go type of its payload.
var (
	RequestTransferCommand    = commands.DefineCommand[RequestedData](RequestTransfer)
	CompleteTransferCommand   = commands.DefineCommand[CompletedData](CompleteTransfer)
	CompensateTransferCommand = commands.DefineCommand[ReasonData](CompensateTransfer)
	FailTransferCommand       = commands.DefineCommand[ReasonData](FailTransfer)
)

// Domain describes the transfer write model: its events and its
// commands, each deciding against the transfer's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(), deciders()...)
}

// deciders returns the transfer's decision per command type.
func deciders() []commands.Decider[Transfer] {
	return []commands.Decider[Transfer]{
		commands.OnCommand(RequestTransferCommand, decideRequest),
		decideFinish(CompleteTransferCommand, TransferCompletedEvent),
		decideFinish(CompensateTransferCommand, TransferCompensatedEvent),
		decideFinish(FailTransferCommand, TransferFailedEvent),
	}
}

// NewFacet returns the transfer facet on store (reads of a transfer's
// STATE, appends that the rules check). upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Transfer], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Transfer]{Store: store, AggregateType: AggregateType, Processor: Processor(), Upcasters: upcasters})
}

// decideRequest requests a new transfer between two different accounts
// (each a usable aggregate id) for a positive amount.
func decideRequest(cur eventstore.State[Transfer], cmd commands.Command, d RequestedData) ([]eventstore.NewEvent, error) {
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
		return nil, commands.ConflictWith(ErrExists, "transfer %s already exists", cmd.AggregateID)
	}
	return []eventstore.NewEvent{TransferRequestedEvent.New(d)}, nil
}

// decideFinish is the decision of cmd, which records an outcome (ev,
// with the command's payload) of a transfer that was requested and is
// not finished yet.
func decideFinish[D any](cmd commands.CommandDef[D], ev eventstore.EventDef[D]) commands.Decider[Transfer] {
	return commands.OnCommand(cmd, func(cur eventstore.State[Transfer], c commands.Command, d D) ([]eventstore.NewEvent, error) {
		switch {
		case cur.Item.Status == StatusNone:
			return nil, commands.NotFoundWith(ErrNotFound, "transfer %s does not exist", c.AggregateID)
		case cur.Item.Status.Finished():
			return nil, commands.ConflictWith(ErrFinished, "transfer %s is already %s", c.AggregateID, cur.Item.Status)
		}
		return []eventstore.NewEvent{ev.New(d)}, nil
	})
}
