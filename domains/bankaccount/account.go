// Package bankaccount is an example bank-account ledger, as an
// eventstore facet: accounts are created and renamed, transactions move
// the balance, a transaction that would take the balance below the
// overdraft limit is rejected ("insufficient funds"), and the transaction
// that takes a balance from ≥ 0 to below 0 publishes an accountOverdrawn
// outbound event.
package bankaccount

// AggregateType is the facet's aggregate type.
const AggregateType = "BANK_ACCOUNT"

// Event types (inbound) and outbound event names.
const (
	EventAccountCreation     = "ACCOUNT_CREATION"
	EventAccountUpdate       = "ACCOUNT_UPDATE"
	EventTransactionAccepted = "TRANSACTION_ACCEPTED"
	OutboundAccountOverdrawn = "accountOverdrawn"
)

// DefaultMinimumBalance is the overdraft every new account gets.
const DefaultMinimumBalance = -1000

// Account is the facet's state.
type Account struct {
	ID             string `json:"id"`
	OwnerFirst     string `json:"ownerFirst"`
	OwnerLast      string `json:"ownerLast"`
	Balance        int64  `json:"balance"`
	MinimumBalance int64  `json:"minimumBalance"`
}

// AccountCreation opens the account.
type AccountCreation struct {
	ID string `json:"id"`
}

// AccountUpdate renames the owner.
type AccountUpdate struct {
	OwnerFirst string `json:"ownerFirst"`
	OwnerLast  string `json:"ownerLast"`
}

// Transaction moves the balance by Amount (negative: a debit).
type Transaction struct {
	Desc   string `json:"desc"`
	Amount int64  `json:"amount"`
}

// AccountOverdrawn is published when a transaction takes the balance
// from ≥ 0 to below 0.
type AccountOverdrawn struct {
	AccountID string `json:"accountId"`
}

// Initial is the state of an account before its first event: balance 0
// and the default overdraft.
func Initial() Account { return Account{MinimumBalance: DefaultMinimumBalance} }
