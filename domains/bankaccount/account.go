// Package bankaccount is an example bank-account ledger, as an
// eventstore facet: accounts are opened and their owner renamed,
// transactions move the balance, a transaction that would take the
// balance below the overdraft limit is rejected ("insufficient funds"),
// and the transaction that takes a balance from ≥ 0 to below 0 publishes
// an accountOverdrawn outbound event.
//
// An account can be closed (AccountClosed). Closing deletes nothing: the
// account keeps its balance and its history, and refuses every later
// transaction ("account closed") except a refund, a credit marked Refund
// (money paid back to it, such as a compensated transfer), which it
// accepts so that money owed back is never lost.
package bankaccount

import "github.com/eventpipe/eventpipe/eventstore"

// AggregateType of bank accounts.
const AggregateType = "bankaccount"

// Event types.
const (
	AccountOpened       = "AccountOpened"       // payload AccountOpenedData
	OwnerRenamed        = "OwnerRenamed"        // payload OwnerRenamedData
	TransactionAccepted = "TransactionAccepted" // payload TransactionAcceptedData
	AccountClosed       = "AccountClosed"       // payload AccountClosedData
)

// Event definitions: each event type with the Go type of its payload.
var (
	AccountOpenedEvent       = eventstore.DefineEvent[AccountOpenedData](AccountOpened)
	OwnerRenamedEvent        = eventstore.DefineEvent[OwnerRenamedData](OwnerRenamed)
	TransactionAcceptedEvent = eventstore.DefineEvent[TransactionAcceptedData](TransactionAccepted)
	AccountClosedEvent       = eventstore.DefineEvent[AccountClosedData](AccountClosed)
)

// Refusal codes (see eventstore.Code): the kinds of refusal of the
// ledger's commands and rules, matched with errors.Is.
const (
	ErrExists            eventstore.Code = "bankaccount.exists"             // the account is already open
	ErrNotFound          eventstore.Code = "bankaccount.not_found"          // no such account (never opened)
	ErrAlreadyClosed     eventstore.Code = "bankaccount.already_closed"     // closing a closed account
	ErrClosed            eventstore.Code = "bankaccount.closed"             // a transaction (not a refund) on a closed account
	ErrInsufficientFunds eventstore.Code = "bankaccount.insufficient_funds" // past the overdraft limit
	ErrRefundNotCredit   eventstore.Code = "bankaccount.refund_not_credit"  // a refund of a debit
	ErrDuplicateDesc     eventstore.Code = "bankaccount.duplicate_desc"     // a description already used (UniqueDescriptions)
)

// OutboundAccountOverdrawn is published (payload AccountOverdrawnData) by
// the transaction that takes a balance from ≥ 0 to below 0.
const OutboundAccountOverdrawn = "accountOverdrawn"

// DefaultMinimumBalance is the overdraft every new account gets.
const DefaultMinimumBalance = -1000

// Account is the state of one account.
type Account struct {
	ID             string `json:"id"`
	OwnerFirst     string `json:"ownerFirst"`
	OwnerLast      string `json:"ownerLast"`
	Balance        int64  `json:"balance"`
	MinimumBalance int64  `json:"minimumBalance"`
	// Closed is set by AccountClosed; the balance stays as it was.
	Closed bool `json:"closed"`
}

// AccountOpenedData is the payload of AccountOpened.
type AccountOpenedData struct {
	ID string `json:"id"`
}

// OwnerRenamedData is the payload of OwnerRenamed and RenameOwner.
type OwnerRenamedData struct {
	OwnerFirst string `json:"ownerFirst"`
	OwnerLast  string `json:"ownerLast"`
}

// TransactionAcceptedData is the payload of TransactionAccepted and
// RecordTransaction: the balance moves by Amount (negative: a debit).
// Refund marks money paid back to the account (for example a compensated
// transfer): it must be a credit (Amount > 0), and it is the one
// transaction a closed account accepts.
type TransactionAcceptedData struct {
	Desc   string `json:"desc"`
	Amount int64  `json:"amount"`
	Refund bool   `json:"refund,omitempty"`
}

// AccountClosedData is the payload of AccountClosed.
type AccountClosedData struct {
	Reason string `json:"reason,omitempty"`
}

// AccountOverdrawnData is the payload of the accountOverdrawn outbound
// event.
type AccountOverdrawnData struct {
	AccountID string `json:"accountId"`
}

// Initial is the state of an account before its first event: balance 0
// and the default overdraft.
func Initial() Account { return Account{MinimumBalance: DefaultMinimumBalance} }

// Opened is the event that opens account id.
func Opened(id string) eventstore.NewEvent {
	return AccountOpenedEvent.New(AccountOpenedData{ID: id})
}

// Renamed is the event that sets the owner's name.
func Renamed(first, last string) eventstore.NewEvent {
	return OwnerRenamedEvent.New(OwnerRenamedData{OwnerFirst: first, OwnerLast: last})
}

// Transacted is the event of a transaction of amount.
func Transacted(desc string, amount int64) eventstore.NewEvent {
	return TransactionAcceptedEvent.New(TransactionAcceptedData{Desc: desc, Amount: amount})
}

// Refunded is the event of a refund of amount (a credit, amount > 0,
// that a closed account accepts too).
func Refunded(desc string, amount int64) eventstore.NewEvent {
	return TransactionAcceptedEvent.New(TransactionAcceptedData{Desc: desc, Amount: amount, Refund: true})
}

// Closed is the event that closes the account, giving reason.
func Closed(reason string) eventstore.NewEvent {
	return AccountClosedEvent.New(AccountClosedData{Reason: reason})
}
