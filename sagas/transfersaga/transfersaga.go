// Package transfersaga is the money-transfer saga: it moves the money of
// a transfer (domains/transfer) between two bank accounts
// (domains/bankaccount), one aggregate at a time, and compensates what
// cannot be finished.
//
// On TransferRequested it debits the source account (step debit). A
// debit that is refused (insufficient funds, unknown or closed account)
// fails the transfer: nothing moved. An accepted debit is followed by the
// credit of the target account (step credit); an accepted credit
// completes the transfer. A refused credit (target closed or unknown) is
// compensated: the source gets the money back as a refund, a new
// transaction (step refund), never by deleting the debit, and the
// transfer is marked compensated.
//
// A transfer not finished within its deadline (Config.Timeout) cancels
// the step in flight (see sagas.Effects.Cancel): a debit or credit not
// handled by then never will be, and the step's answer decides as above,
// except that a debit accepted after the deadline is refunded at once.
// The deadline is a stored timeout: it fires after a restart too.
//
// An operator's abort (`eventpipe sagas abort`, sagas.Operator.Abort)
// compensates as the deadline does, at once: the debit or credit in
// flight is cancelled and the step's answer decides. A debit refused (the
// cancel won) fails the transfer; a debit accepted is refunded; a credit
// refused is refunded; a refund in flight is left to finish. The transfer
// aggregate records FailTransfer or CompensateTransfer with the abort's
// reason, and the instance ends OutcomeAborted (OutcomeRefundRefused when
// the refund is refused). A credit accepted before the cancel completes
// the transfer: the abort came too late, and the instance ends
// OutcomeCompleted.
package transfersaga

import (
	"fmt"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

// Name is the saga's name: its consumer group is saga.transfer and its
// command ids start with "transfer.".
const Name = "transfer"

// DefaultTimeout is a transfer's default deadline.
const DefaultTimeout = 30 * time.Second

// Steps, also the last part of the command ids the saga sends.
const (
	StepDebit      = "debit"
	StepCredit     = "credit"
	StepRefund     = "refund"
	StepComplete   = "complete"
	StepCompensate = "compensate"
	StepFail       = "fail"
)

// Outcomes of a finished instance.
const (
	OutcomeCompleted   = "completed"
	OutcomeCompensated = "compensated"
	OutcomeFailed      = "failed"
	// OutcomeRefundRefused says the refund of a compensation was refused:
	// the bank-account rules accept refunds even on closed accounts, so
	// this needs an operator.
	OutcomeRefundRefused = "refund-refused"
	// OutcomeAborted: an operator aborted the transfer and the saga
	// compensated it (nothing moved, or the debit was refunded).
	OutcomeAborted = sagas.OutcomeAborted
)

// deadline names the saga's one timeout.
const deadline = "deadline"

// State is an instance's state.
type State struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
	// Step is the step whose answer the instance waits for.
	Step string `json:"step"`
	// Late is set when the deadline passed.
	Late bool `json:"late,omitempty"`
	// Reason is why the transfer was compensated or failed.
	Reason string `json:"reason,omitempty"`
	// Aborted is the operator's reason when the transfer was aborted.
	Aborted string `json:"aborted,omitempty"`
}

// Config configures the saga.
type Config struct {
	// Timeout is a transfer's deadline, from its request (default
	// DefaultTimeout).
	Timeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
}

// Validate reports the first invalid field; a zero field counts as its
// default.
func (c Config) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("transfersaga: Config: %w", &eventstore.ValidationError{Field: "Timeout", Reason: fmt.Sprintf("%v is negative", c.Timeout)})
	}
	return nil
}

// New returns the saga, for sagas.Config.Saga. It panics when cfg is
// invalid (see Validate): a saga's configuration is the program's.
func New(cfg Config) sagas.Saga[State] {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return sagas.Saga[State]{
		Name:    Name,
		Events:  []string{transfer.AggregateType},
		Route:   route,
		Initial: func(string) State { return State{} },
		Handle: func(s State, in sagas.Input, fx *sagas.Effects) (State, error) {
			return handle(cfg, s, in, fx)
		},
		Abort: abort,
	}
}

// abort compensates an aborted transfer: the step in flight is
// cancelled, as at the deadline, and its answer decides (see answered).
func abort(s State, in sagas.Input, fx *sagas.Effects) (State, error) {
	s.Aborted = in.Reason
	if s.Aborted == "" {
		s.Aborted = "aborted"
	}
	why := "transfer aborted: " + s.Aborted
	fx.Clear(deadline)
	switch s.Step {
	case StepDebit:
		s.Late = true // a debit accepted before the cancel is refunded
		fx.Cancel(StepDebit, account(s.From), why)
	case StepCredit:
		fx.Cancel(StepCredit, account(s.To), why)
	case StepRefund:
		// Money owed back: the refund is left to finish.
	default:
		fx.Finish(OutcomeAborted) // nothing sent yet
	}
	return s, nil
}

// outcome is ok, or OutcomeAborted for an aborted transfer.
func outcome(s State, ok string) string {
	if s.Aborted != "" {
		return OutcomeAborted
	}
	return ok
}

// route starts an instance per transfer, on its request; the transfer's
// other events are the saga's own doing.
func route(in sagas.Input) (string, bool) {
	if in.Kind == sagas.KindEvent && in.Event.EventType == transfer.TransferRequested {
		return in.Event.AggregateID, true
	}
	return "", false
}

func handle(cfg Config, s State, in sagas.Input, fx *sagas.Effects) (State, error) {
	switch in.Kind {
	case sagas.KindEvent:
		if s.Step != "" {
			return s, nil // a second TransferRequested cannot be: the aggregate refuses it
		}
		req, err := transfer.TransferRequestedEvent.Decode(in.Event)
		if err != nil {
			return s, err
		}
		s = State{From: req.From, To: req.To, Amount: req.Amount, Step: StepDebit}
		send(fx, StepDebit, s.From, -s.Amount, false, fmt.Sprintf("transfer %s to %s", fx.Instance(), s.To))
		fx.After(deadline, cfg.Timeout)
		return s, nil
	case sagas.KindTimeout:
		if in.Timeout != deadline || s.Late {
			return s, nil
		}
		s.Late = true
		switch s.Step {
		case StepDebit:
			fx.Cancel(StepDebit, account(s.From), "transfer deadline passed")
		case StepCredit:
			fx.Cancel(StepCredit, account(s.To), "transfer deadline passed")
		}
		// A refund is money owed back: it is not cancelled, it is retried
		// until the account takes it.
		return s, nil
	case sagas.KindResult:
		if in.Step != s.Step {
			return s, nil // the answer to a step already decided (a cancel and its command)
		}
		return answered(s, in.Result, fx), nil
	}
	return s, nil
}

// answered moves the instance on from the answer to its current step.
func answered(s State, res commands.Result, fx *sagas.Effects) State {
	ok := res.Status == commands.StatusAccepted
	why := string(res.Status)
	if res.Reason != "" {
		why += ": " + res.Reason
	}
	switch {
	case s.Step == StepDebit && ok && s.Aborted != "":
		s.Reason = "aborted after the debit: " + s.Aborted
		return refund(s, fx)
	case s.Step == StepDebit && ok && s.Late:
		s.Reason = "deadline passed after the debit"
		return refund(s, fx)
	case s.Step == StepDebit && ok:
		s.Step = StepCredit
		send(fx, StepCredit, s.To, s.Amount, false, fmt.Sprintf("transfer %s from %s", fx.Instance(), s.From))
	case s.Step == StepDebit:
		s.Step, s.Reason = StepFail, "debit "+why
		finish(fx, StepFail, transfer.FailTransferCommand, transfer.ReasonData{Reason: s.Reason})
		fx.Finish(outcome(s, OutcomeFailed))
	case s.Step == StepCredit && ok:
		s.Step = StepComplete
		finish(fx, StepComplete, transfer.CompleteTransferCommand, transfer.CompletedData{})
		fx.Finish(OutcomeCompleted)
	case s.Step == StepCredit:
		s.Reason = "credit " + why
		return refund(s, fx)
	case s.Step == StepRefund && ok:
		s.Step = StepCompensate
		finish(fx, StepCompensate, transfer.CompensateTransferCommand, transfer.ReasonData{Reason: s.Reason})
		fx.Finish(outcome(s, OutcomeCompensated))
	case s.Step == StepRefund:
		s.Reason += "; refund " + why
		fx.Finish(OutcomeRefundRefused)
	}
	return s
}

// refund gives the source its money back.
func refund(s State, fx *sagas.Effects) State {
	s.Step = StepRefund
	send(fx, StepRefund, s.From, s.Amount, true, fmt.Sprintf("refund of transfer %s", fx.Instance()))
	return s
}

// send queues a bank-account transaction as step.
func send(fx *sagas.Effects, step, accountID string, amount int64, isRefund bool, desc string) {
	cmd, err := bankaccount.RecordTransactionCommand.New(bankaccount.AggregateType, accountID,
		bankaccount.TransactionAcceptedData{Desc: desc, Amount: amount, Refund: isRefund})
	if err != nil {
		panic(err) // a struct of strings and numbers always encodes
	}
	fx.Send(step, cmd)
}

// finish records the transfer's outcome on its aggregate: def's command
// with payload p.
func finish[P any](fx *sagas.Effects, step string, def commands.CommandDef[P], p P) {
	cmd, err := def.New(transfer.AggregateType, fx.Instance(), p)
	if err != nil {
		panic(err)
	}
	fx.Send(step, cmd)
}

func account(id string) eventstore.Ref {
	return eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
}
