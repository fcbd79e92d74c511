package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
)

// transfersChapter sends three transfers between the accounts chapter's
// accounts and a closed one, waits for the transfer saga (run by
// `consume --all`) to finish each as the story needs (completed,
// compensated, failed), prints the money each moved on the accounts, and
// waits for the accounts read model to show the new balances.
func (s *scenario) transfersChapter(ctx context.Context, n *narrator) error {
	n.chapter("Transfers between accounts, carried by the transfer saga")
	alice, bob, carol, erin := s.id("alice"), s.id("bob"), s.id("carol"), s.id("erin")
	for _, st := range []step{
		{bankaccount.OpenAccount, erin, struct{}{}, commands.StatusAccepted},
		{bankaccount.CloseAccount, erin, bankaccount.CloseAccountData{Reason: "moved abroad"}, commands.StatusAccepted},
	} {
		if _, err := s.send(ctx, n, st); err != nil {
			return err
		}
	}
	s.balances[erin] = 0
	transfers := []struct {
		id, from, to string
		amount       int64
		want         transfer.Status
	}{
		{s.id("transfer-1"), alice, bob, 100, transfer.StatusCompleted},
		{s.id("transfer-2"), alice, erin, 50, transfer.StatusCompensated},
		{s.id("transfer-3"), carol, alice, 5000, transfer.StatusFailed},
	}
	for _, tr := range transfers {
		if _, err := s.send(ctx, n, step{transfer.RequestTransfer, tr.id, transfer.RequestedData{From: tr.from, To: tr.to, Amount: tr.amount}, commands.StatusAccepted}); err != nil {
			return err
		}
	}
	n.line("each request only records TransferRequested; the saga (consumer group saga.transfer) then sends")
	n.line("the debit, the credit or the refund as RecordTransaction commands with ids transfer.<id>.<step>:")
	for _, tr := range transfers {
		got, err := s.transferOutcome(ctx, tr.id)
		if err != nil {
			return err
		}
		moved, err := s.sagaMoves(ctx, tr.id, tr.from, tr.to)
		if err != nil {
			return err
		}
		outcome := string(got.Status)
		if got.Reason != "" {
			outcome += " (" + got.Reason + ")"
		}
		n.line("  %-20s %s → %s %5d   %-46s %s", tr.id, tr.from, tr.to, tr.amount, outcome, moved)
		if got.Status != tr.want {
			return fmt.Errorf("demo: transfer %s ended %s, the story expects %s", tr.id, got.Status, tr.want)
		}
		if got.Status == transfer.StatusCompleted {
			s.balances[tr.from] -= tr.amount
			s.balances[tr.to] += tr.amount
		}
	}
	n.line("erin's account is closed: the credit is refused and alice gets her 50 back as a refund, a new")
	n.line("transaction; carol's debit is past her overdraft, so nothing moves and the transfer fails")
	deadline := time.Now().Add(s.cfg.Timeout)
	for {
		mismatch, err := s.compare(ctx)
		if err != nil {
			return err
		}
		if mismatch == "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: after %s the accounts read model differs from the transfers: %s", s.cfg.Timeout, mismatch)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.line("balances in the accounts read model: alice %d, bob %d, carol %d, erin %d (as the outcomes imply)",
		s.balances[alice], s.balances[bob], s.balances[carol], s.balances[erin])
	return nil
}

// transferOutcome waits until transfer id is finished and returns it.
func (s *scenario) transferOutcome(ctx context.Context, id string) (transfer.Transfer, error) {
	ref := eventstore.Ref{Type: transfer.AggregateType, ID: id}
	deadline := time.Now().Add(s.cfg.Timeout)
	for {
		var tr transfer.Transfer
		st, err := s.store.State(ctx, ref)
		if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
			return tr, err
		}
		if err == nil {
			if err := json.Unmarshal(st.Data, &tr); err != nil {
				return tr, err
			}
			if tr.Status.Finished() {
				return tr, nil
			}
		}
		if time.Now().After(deadline) {
			return tr, fmt.Errorf("demo: transfer %s still %q after %s: is the transfer saga running (consume --all)?", id, tr.Status, s.cfg.Timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sagaMoves lists the transactions the saga's commands for transfer id
// appended on its two accounts, e.g. "debit -100, credit +100".
func (s *scenario) sagaMoves(ctx context.Context, id string, accounts ...string) (string, error) {
	out := ""
	for _, acc := range accounts {
		evs, err := s.store.Load(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: acc}, 0)
		if err != nil {
			return "", err
		}
		for _, e := range evs {
			if tid, step, ok := sagas.ParseCommandID(transfersaga.Name, e.Metadata.CausationID); ok && tid == id && e.EventType == bankaccount.TransactionAccepted {
				d, err := bankaccount.TransactionAcceptedEvent.Decode(e)
				if err != nil {
					return "", err
				}
				if out != "" {
					out += ", "
				}
				out += fmt.Sprintf("%s %+d", step, d.Amount)
			}
		}
	}
	if out == "" {
		out = "no money moved"
	}
	return out, nil
}
