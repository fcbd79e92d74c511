package transfer

import "github.com/eventpipe/eventpipe/eventstore"

// Processor returns the transfer rules: a transfer is requested once,
// between two different accounts, for a positive amount, then finished
// once (completed, compensated or failed), each outcome publishing its
// outbound event. They are pure: no I/O.
func Processor() eventstore.Processor[Transfer] {
	return eventstore.NewProcessor(func() Transfer { return Transfer{} },
		eventstore.OnEventEnvelope(TransferRequestedEvent, applyRequested),
		eventstore.OnEvent(TransferCompletedEvent, func(t Transfer, _ CompletedData, out *eventstore.Outbox) (Transfer, error) {
			return finish(t, StatusCompleted, "", OutboundTransferCompleted, out)
		}),
		eventstore.OnEvent(TransferCompensatedEvent, func(t Transfer, ev ReasonData, out *eventstore.Outbox) (Transfer, error) {
			return finish(t, StatusCompensated, ev.Reason, OutboundTransferCompensated, out)
		}),
		eventstore.OnEvent(TransferFailedEvent, func(t Transfer, ev ReasonData, out *eventstore.Outbox) (Transfer, error) {
			return finish(t, StatusFailed, ev.Reason, OutboundTransferFailed, out)
		}),
	)
}

// applyRequested starts the transfer; its id is the aggregate's.
func applyRequested(t Transfer, env eventstore.Envelope, ev RequestedData, _ *eventstore.Outbox) (Transfer, error) {
	switch {
	case t.Status != StatusNone:
		return t, eventstore.RejectWith(ErrExists, "transfer %s was already requested", t.ID)
	case ev.From == "" || ev.To == "" || ev.From == ev.To:
		return t, eventstore.RejectWith(ErrBadRequest, "a transfer needs two different accounts, got %q and %q", ev.From, ev.To)
	case ev.Amount <= 0:
		return t, eventstore.RejectWith(ErrBadRequest, "amount %d, want > 0", ev.Amount)
	}
	return Transfer{ID: env.AggregateID, From: ev.From, To: ev.To, Amount: ev.Amount, Status: StatusRequested}, nil
}

// finish records the outcome of a requested transfer and publishes
// outbound.
func finish(t Transfer, status Status, reason, outbound string, out *eventstore.Outbox) (Transfer, error) {
	switch {
	case t.Status == StatusNone:
		return t, eventstore.RejectWith(ErrNotFound, "transfer was never requested")
	case t.Status.Finished():
		return t, eventstore.RejectWith(ErrFinished, "transfer %s is already %s", t.ID, t.Status)
	}
	t.Status, t.Reason = status, reason
	out.Publish(outbound, OutcomeData{TransferID: t.ID, From: t.From, To: t.To, Amount: t.Amount, Reason: reason})
	return t, nil
}
