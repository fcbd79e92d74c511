package bankaccount_test

import (
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/testkit"
)

// The ledger's commands through its real handlers on the in-memory
// store: accepted transactions, the overdraft's outbound event, and
// every refusal, with no service running.

func TestFixtureOpenAndRenameAnAccount(t *testing.T) {
	f := testkit.NewDomainFixture(t, bankaccount.Domain())
	f.When("acc-1", bankaccount.OpenAccount, `{}`).
		ThenEvents(bankaccount.Opened("acc-1")).
		ThenNoOutbound().
		ThenState("acc-1", bankaccount.Account{ID: "acc-1", MinimumBalance: bankaccount.DefaultMinimumBalance})
	f.When("acc-1", bankaccount.RenameOwner, bankaccount.OwnerRenamedData{OwnerFirst: "Ada", OwnerLast: "Lovelace"}).
		ThenEvents(bankaccount.Renamed("Ada", "Lovelace"))
	f.When("acc-1", bankaccount.OpenAccount, `{}`).
		ThenRefusedWith(commands.StatusConflict, bankaccount.ErrExists)
}

func TestFixtureADebitIntoTheOverdraftPublishesAccountOverdrawnOnce(t *testing.T) {
	f := testkit.NewDomainFixture(t, bankaccount.Domain())
	f.Given("acc-1", bankaccount.Opened("acc-1"), bankaccount.Transacted("salary", 100)).
		When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -150}).
		ThenEvents(bankaccount.Transacted("rent", -150)).
		ThenOutbound(testkit.Outbound(bankaccount.OutboundAccountOverdrawn, bankaccount.AccountOverdrawnData{AccountID: "acc-1"}))
	// Already below zero: a further debit is accepted without a second
	// accountOverdrawn.
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "coffee", Amount: -5}).
		ThenEvents(bankaccount.Transacted("coffee", -5)).
		ThenNoOutbound().
		ThenState("acc-1", bankaccount.Account{ID: "acc-1", Balance: -55, MinimumBalance: bankaccount.DefaultMinimumBalance})
}

func TestFixtureADebitPastTheOverdraftIsRejected(t *testing.T) {
	testkit.NewDomainFixture(t, bankaccount.Domain()).
		Given("acc-1", bankaccount.Opened("acc-1"), bankaccount.Transacted("loan", -900)).
		When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "tv", Amount: -101}).
		ThenRefusedWith(commands.StatusRejected, bankaccount.ErrInsufficientFunds).
		ThenNoOutbound()
}

func TestFixtureAClosedAccountTakesOnlyRefunds(t *testing.T) {
	f := testkit.NewDomainFixture(t, bankaccount.Domain())
	f.Given("acc-1", bankaccount.Opened("acc-1"), bankaccount.Transacted("salary", 40), bankaccount.Closed("moved away"))
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "late bill", Amount: -10}).
		ThenRefusedWith(commands.StatusRejected, bankaccount.ErrClosed)
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "refund", Amount: 25, Refund: true}).
		ThenEvents(bankaccount.Refunded("refund", 25))
	f.When("acc-1", bankaccount.CloseAccount, bankaccount.CloseAccountData{Reason: "again"}).
		ThenRefusedWith(commands.StatusConflict, bankaccount.ErrAlreadyClosed)
}

func TestFixtureCommandsOnNoAccountOrWithBadInputAreRefused(t *testing.T) {
	f := testkit.NewDomainFixture(t, bankaccount.Domain())
	f.When("nobody", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "x", Amount: 5}).
		ThenRefusedWith(commands.StatusNotFound, bankaccount.ErrNotFound)
	f.Given("acc-1", bankaccount.Opened("acc-1"))
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "nothing", Amount: 0}).
		ThenInvalid("amount")
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "refund", Amount: -3, Refund: true}).
		ThenInvalid("amount")
	f.When("acc-1", bankaccount.CloseAccount, `{"reason":"x","when":"now"}`).
		ThenInvalid("payload")
}

func TestFixtureAStaleExpectedVersionIsAConflict(t *testing.T) {
	f := testkit.NewDomainFixture(t, bankaccount.Domain())
	f.Given("acc-1", bankaccount.Opened("acc-1"), bankaccount.Transacted("salary", 10))
	cmd, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, "acc-1", bankaccount.TransactionAcceptedData{Desc: "a", Amount: 1})
	if err != nil {
		t.Fatal(err)
	}
	stale := int64(1)
	cmd.ExpectedVersion = &stale
	f.WhenCommand(cmd).ThenRefusedWith(commands.StatusConflict, commands.ErrVersionConflict)
}
