package readmodels

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy/subjects"
)

// Accounts keeps accounts (owner, balance, whether and when they were
// closed) and their transaction history. A closed account keeps its row.
type Accounts struct{}

// Name implements projections.Projection.
func (Accounts) Name() string { return "accounts" }

// AggregateTypes implements projections.Projection.
func (Accounts) AggregateTypes() []string {
	return []string{bankaccount.AggregateType, subjects.AggregateType}
}

// Tables implements projections.Rebuildable.
func (Accounts) Tables() []string { return []string{"accounts", "account_transactions"} }

// EventTypes implements projections.EventTyper.
func (Accounts) EventTypes() []string {
	return append(bankaccount.Domain().EventTypes.Names(), subjects.SubjectForgotten)
}

// Apply implements projections.Projection.
func (Accounts) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	switch e.EventType {
	case bankaccount.AccountOpened:
		b.Queue(`INSERT INTO accounts (account_id, version, apply_count, opened_at, updated_at)
			VALUES ($1, $2, 1, $3, $3)`, e.AggregateID, e.Sequence, e.OccurredAt)
		return nil
	case bankaccount.OwnerRenamed:
		var u bankaccount.OwnerRenamedData
		if err := e.DecodePayload(&u); err != nil {
			return err
		}
		touch(b, "accounts", "account_id", e, `owner_first = $4, owner_last = $5, updated_at = $3`, u.OwnerFirst, u.OwnerLast)
		return nil
	case bankaccount.TransactionAccepted:
		var t bankaccount.TransactionAcceptedData
		if err := e.DecodePayload(&t); err != nil {
			return err
		}
		touch(b, "accounts", "account_id", e, `balance = balance + $4, updated_at = $3`, t.Amount)
		b.Queue(`INSERT INTO account_transactions (account_id, seq, description, amount, balance, occurred_at)
			SELECT $1, $2, $3, $4, balance, $5 FROM accounts WHERE account_id = $1`,
			e.AggregateID, e.Sequence, t.Desc, t.Amount, e.OccurredAt)
		return nil
	case bankaccount.AccountClosed:
		touch(b, "accounts", "account_id", e, `closed = true, closed_at = $3, updated_at = $3`)
		return nil
	case subjects.SubjectForgotten:
		// The subject's accounts keep their balances, their holder's
		// name and their transactions' descriptions forgotten.
		return scrub(b, e, bankaccount.AggregateType,
			`UPDATE accounts SET owner_first = $1, owner_last = $1 WHERE account_id = ANY($2)`,
			`UPDATE account_transactions SET description = $1 WHERE account_id = ANY($2)`)
	default:
		return unknownEvent(e)
	}
}

// Export implements projections.Exporter: the rows of the accounts among
// ids and of their transactions.
func (Accounts) Export(ctx context.Context, db querier, ids map[string][]string) (map[string][]json.RawMessage, error) {
	accounts := ids[bankaccount.AggregateType]
	if len(accounts) == 0 {
		return nil, nil
	}
	out := map[string][]json.RawMessage{}
	for table, query := range map[string]string{
		"accounts":             `SELECT row_to_json(t) FROM accounts t WHERE account_id = ANY($1) ORDER BY account_id`,
		"account_transactions": `SELECT row_to_json(t) FROM account_transactions t WHERE account_id = ANY($1) ORDER BY account_id, seq`,
	} {
		rows, err := exportRows(ctx, db, query, accounts)
		if err != nil {
			return nil, fmt.Errorf("accounts: export %s: %w", table, err)
		}
		out[table] = rows
	}
	return out, nil
}
