// Package readmodels holds the Postgres read models of the example
// domains (tables in migrations/postgres), each a projections.Projection.
package readmodels

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
)

// Accounts keeps accounts (owner, balance) and their transaction history.
type Accounts struct{}

// Name implements projections.Projection.
func (Accounts) Name() string { return "accounts" }

// AggregateTypes implements projections.Projection.
func (Accounts) AggregateTypes() []string { return []string{bankaccount.AggregateType} }

// Tables implements projections.Rebuildable.
func (Accounts) Tables() []string { return []string{"accounts", "account_transactions"} }

// EventTypes implements projections.EventTyper.
func (Accounts) EventTypes() []string {
	return []string{bankaccount.EventAccountCreation, bankaccount.EventAccountUpdate, bankaccount.EventTransactionAccepted}
}

// Apply implements projections.Projection. An event type it does not know
// is a permanent error: it goes to the poison topic rather than being
// dropped silently.
func (Accounts) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	switch e.EventType {
	case bankaccount.EventAccountCreation:
		b.Queue(`INSERT INTO accounts (account_id, version, apply_count, opened_at, updated_at)
			VALUES ($1, $2, 1, $3, $3)`, e.AggregateID, e.Sequence, e.OccurredAt)
		return nil
	case bankaccount.EventAccountUpdate:
		var u bankaccount.AccountUpdate
		if err := decode(e, &u); err != nil {
			return err
		}
		touch(b, "accounts", "account_id", e, `owner_first = $4, owner_last = $5, updated_at = $3`, u.OwnerFirst, u.OwnerLast)
		return nil
	case bankaccount.EventTransactionAccepted:
		var t bankaccount.Transaction
		if err := decode(e, &t); err != nil {
			return err
		}
		touch(b, "accounts", "account_id", e, `balance = balance + $4, updated_at = $3`, t.Amount)
		b.Queue(`INSERT INTO account_transactions (account_id, seq, description, amount, balance, occurred_at)
			SELECT $1, $2, $3, $4, balance, $5 FROM accounts WHERE account_id = $1`,
			e.AggregateID, e.Sequence, t.Desc, t.Amount, e.OccurredAt)
		return nil
	default:
		return bus.Permanent(fmt.Errorf("accounts: unknown event type %q", e.EventType))
	}
}

// touch queues the update of the row of e's aggregate in table (key
// column key) with set, which may use $3 (the event's time) and
// parameters from $4, moving its version and apply count. A missing row
// fails the batch: the creating event was never applied, which positions
// and gap repair rule out.
func touch(b *pgx.Batch, table, key string, e eventstore.Envelope, set string, args ...any) {
	b.Queue(`UPDATE `+table+` SET `+set+`, version = $2, apply_count = apply_count + 1
		WHERE `+key+` = $1`, append([]any{e.AggregateID, e.Sequence, e.OccurredAt}, args...)...).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%s: %s: no row (its creating event was never applied)", table, e)
		}
		return nil
	})
}

// decode unmarshals e's payload; a bad payload is permanent (poison).
func decode(e eventstore.Envelope, v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return bus.Permanent(fmt.Errorf("%s payload: %w", e, err))
	}
	return nil
}

// All returns every read model, by name.
func All() map[string]projections.Projection {
	out := map[string]projections.Projection{}
	for _, p := range []projections.Projection{Accounts{}, Orders{}, Todos{}} {
		out[p.Name()] = p
	}
	return out
}
