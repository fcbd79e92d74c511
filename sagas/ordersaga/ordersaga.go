// Package ordersaga is seed 000's order flow as a saga: once an order is
// paid it is shipped, and an order that cannot be shipped is refunded
// with a compensating OrderRefunded, never by deleting the payment.
//
// On PaymentProcessed it sends ShipOrder (step ship, with the tracking
// number Config.Tracking gives). An accepted shipment finishes the
// instance (outcome shipped). A refused one (the order was refunded
// meanwhile, or is in no state to ship), or one not answered within
// Config.ShipWithin (the step is cancelled, see sagas.Effects.Cancel),
// refunds what was paid and not refunded yet (step refund; the saga
// counts the order's OrderRefunded events it sees) and finishes refunded;
// with nothing left to refund it finishes at once.
//
// An operator's abort (`eventpipe sagas abort`, sagas.Operator.Abort)
// cancels the shipment in flight: refused (the cancel won), the order is
// refunded as above and the instance ends OutcomeAborted; accepted before
// the cancel, the order has shipped and the instance ends
// OutcomeShipped (the abort came too late). A refund in flight is left
// to finish (OutcomeAborted).
//
// It is not in eventpipe.Builtin: the demo and the order API ship orders
// with their own ShipOrder commands. Register it with Catalog.AddSaga
// where a paid order should ship by itself.
package ordersaga

import (
	"fmt"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

// Name is the saga's name (consumer group saga.order, command ids
// order.<order id>.<step>).
const Name = "order"

// DefaultShipWithin is how long a paid order may wait for its shipment
// by default.
const DefaultShipWithin = 24 * time.Hour

// Steps.
const (
	StepShip   = "ship"
	StepRefund = "refund"
)

// Outcomes.
const (
	OutcomeShipped       = "shipped"
	OutcomeRefunded      = "refunded"
	OutcomeRefundRefused = "refund-refused"
	// OutcomeAborted: an operator aborted the order's saga and it
	// refunded what was paid (or had nothing to refund).
	OutcomeAborted = sagas.OutcomeAborted
)

const deadline = "deadline"

// State is an instance's state.
type State struct {
	Paid     int64  `json:"paid"`
	Refunded int64  `json:"refunded"`
	Step     string `json:"step"`
	Reason   string `json:"reason,omitempty"`
	// Aborted is the operator's reason when the saga was aborted.
	Aborted string `json:"aborted,omitempty"`
}

// Config configures the saga.
type Config struct {
	// ShipWithin is how long after the payment the shipment may take
	// (default DefaultShipWithin).
	ShipWithin time.Duration
	// Tracking gives an order's tracking number (default "TRK-<order id>").
	// It must be pure: the saga decides once per order.
	Tracking func(orderID string) string
}

func (c *Config) setDefaults() {
	if c.ShipWithin == 0 {
		c.ShipWithin = DefaultShipWithin
	}
	if c.Tracking == nil {
		c.Tracking = func(id string) string { return "TRK-" + id }
	}
}

// Validate reports the first invalid field; a zero field counts as its
// default.
func (c Config) Validate() error {
	if c.ShipWithin < 0 {
		return fmt.Errorf("ordersaga: Config: %w", &eventstore.ValidationError{Field: "ShipWithin", Reason: fmt.Sprintf("%v is negative", c.ShipWithin)})
	}
	return nil
}

// New returns the saga, for Catalog.AddSaga or sagas.Config.Saga. It
// panics when cfg is invalid (see Validate): a saga's configuration is
// the program's.
func New(cfg Config) sagas.Saga[State] {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return sagas.Saga[State]{
		Name:   Name,
		Events: []string{order.AggregateType},
		Route: func(in sagas.Input) (string, bool) {
			switch in.Event.EventType {
			case order.PaymentProcessed:
				return in.Event.AggregateID, true
			case order.OrderRefunded:
				return in.Event.AggregateID, false // counted by a running instance
			}
			return "", false
		},
		Initial: func(string) State { return State{} },
		Handle: func(s State, in sagas.Input, fx *sagas.Effects) (State, error) {
			return handle(cfg, s, in, fx)
		},
		Abort: abort,
	}
}

// abort cancels the shipment in flight; its answer decides (handle).
func abort(s State, in sagas.Input, fx *sagas.Effects) (State, error) {
	s.Aborted = in.Reason
	if s.Aborted == "" {
		s.Aborted = "aborted"
	}
	fx.Clear(deadline)
	switch s.Step {
	case StepShip:
		fx.Cancel(StepShip, eventstore.Ref{Type: order.AggregateType, ID: fx.Instance()}, "order saga aborted: "+s.Aborted)
	case StepRefund:
		// Money owed back: the refund is left to finish.
	default:
		fx.Finish(OutcomeAborted)
	}
	return s, nil
}

// refunded is OutcomeRefunded, or OutcomeAborted for an aborted saga.
func refunded(s State) string {
	if s.Aborted != "" {
		return OutcomeAborted
	}
	return OutcomeRefunded
}

func handle(cfg Config, s State, in sagas.Input, fx *sagas.Effects) (State, error) {
	switch in.Kind {
	case sagas.KindEvent:
		switch in.Event.EventType {
		case order.PaymentProcessed:
			if s.Step != "" {
				return s, nil
			}
			paid, err := order.PaymentProcessedEvent.Decode(in.Event)
			if err != nil {
				return s, err
			}
			s.Paid, s.Step = paid.Amount, StepShip
			send(fx, StepShip, order.ShipOrderCommand, order.OrderShippedData{TrackingNumber: cfg.Tracking(fx.Instance())})
			fx.After(deadline, cfg.ShipWithin)
		case order.OrderRefunded:
			r, err := order.OrderRefundedEvent.Decode(in.Event)
			if err != nil {
				return s, err
			}
			s.Refunded += r.Amount
		}
	case sagas.KindTimeout:
		if in.Timeout == deadline && s.Step == StepShip {
			fx.Cancel(StepShip, eventstore.Ref{Type: order.AggregateType, ID: fx.Instance()}, "shipment deadline passed")
		}
	case sagas.KindResult:
		if in.Step != s.Step {
			return s, nil
		}
		ok := in.Result.Status == commands.StatusAccepted
		why := string(in.Result.Status)
		if in.Result.Reason != "" {
			why += ": " + in.Result.Reason
		}
		switch {
		case s.Step == StepShip && ok:
			fx.Finish(OutcomeShipped)
		case s.Step == StepShip:
			s.Reason = "shipment " + why
			left := s.Paid - s.Refunded
			if left <= 0 {
				fx.Finish(refunded(s))
				return s, nil
			}
			s.Step = StepRefund
			send(fx, StepRefund, order.RefundOrderCommand, order.OrderRefundedData{Amount: left, Reason: s.Reason})
		case ok:
			fx.Finish(refunded(s))
		default:
			s.Reason += "; refund " + why
			fx.Finish(OutcomeRefundRefused)
		}
	}
	return s, nil
}

// send queues def's command with payload p to the instance's order as
// step.
func send[P any](fx *sagas.Effects, step string, def commands.CommandDef[P], p P) {
	cmd, err := def.New(order.AggregateType, fx.Instance(), p)
	if err != nil {
		panic(fmt.Sprintf("ordersaga: %v", err)) // structs of strings and numbers always encode
	}
	fx.Send(step, cmd)
}
