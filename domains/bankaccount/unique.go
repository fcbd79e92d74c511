package bankaccount

import (
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// DescriptionsKey is the key of the unique-descriptions fold in an
// account's snapshot.
const DescriptionsKey = "descriptions"

// Descriptions is what the unique-descriptions rule keeps of an account's
// past: every description its transactions used, with the sequence of
// the first transaction that used it. It grows with the account: in a
// snapshot each description takes its length plus about 9 bytes (JSON),
// so the 400 KB item holds some 17,000 descriptions of 15 bytes, 8,500
// of 40 (see docs/domains.md). Past that the snapshot is refused
// (eventstore.ErrItemTooLarge) and commands fold the events since the
// last snapshot that fit: still right, but slower as the account grows.
type Descriptions map[string]int64

// DescriptionsFold folds an account's log into its Descriptions.
func DescriptionsFold() eventstore.Fold[Descriptions] {
	return eventstore.Fold[Descriptions]{
		Key:     DescriptionsKey,
		Initial: func() Descriptions { return Descriptions{} },
		Step: func(seen Descriptions, ev eventstore.Envelope) (Descriptions, error) {
			if ev.EventType != TransactionAccepted {
				return seen, nil
			}
			tx, err := TransactionAcceptedEvent.Decode(ev)
			if err != nil {
				return seen, nil // the rule refuses it
			}
			if seen == nil {
				seen = Descriptions{}
			}
			if _, ok := seen[tx.Desc]; !ok {
				seen[tx.Desc] = ev.Sequence
			}
			return seen, nil
		},
	}
}

// UniqueDescriptions returns the ledger's rules (Processor) with one
// more, which the state alone cannot check: a transaction's description
// is an idempotency key, so a transaction whose description an earlier
// transaction of the account already used is refused ("a transaction with
// this description was recorded at sequence %d": the reason, stored with
// the command's answer and published on the replies topic, does not
// quote the description, which may be personal data). It is a fold rule
// (DescriptionsFold): commands read the account's latest snapshot and the
// events after it, not its whole log.
func UniqueDescriptions() eventstore.Processor[Account] {
	return Processor().With(eventstore.OnFoldEvent(TransactionAcceptedEvent, DescriptionsFold(), applyUniqueTransaction))
}

// applyUniqueTransaction refuses a description seen before, then applies
// the ledger's transaction rule.
func applyUniqueTransaction(a Account, tx TransactionAcceptedData, seen Descriptions, out *eventstore.Outbox) (Account, error) {
	if seq, ok := seen[tx.Desc]; ok {
		return a, eventstore.RejectWith(ErrDuplicateDesc, "a transaction with this description was recorded at sequence %d (the description is not repeated here: it may be personal data)", seq)
	}
	return applyTransaction(a, tx, out)
}

// UniqueDescriptionsDomain is Domain on UniqueDescriptions: the same
// commands, a repeated description refused. Its snapshots hold the
// Descriptions.
func UniqueDescriptionsDomain() commands.Domain {
	d := commands.FacetDomain(AggregateType, UniqueDescriptions(), deciders()...)
	d.Personal = Personal
	d.PersonalCommands = PersonalCommands
	return d
}
