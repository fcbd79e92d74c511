package order

import "github.com/eventpipe/eventpipe/eventstore"

// Processor returns the order rules: the lifecycle placed → paid →
// shipped → delivered, with a refund (of at most what was paid) after
// payment. They are pure: no I/O.
func Processor() eventstore.Processor[Order] {
	return eventstore.NewProcessor(func() Order { return Order{} },
		eventstore.OnEvent(OrderPlacedEvent, applyPlaced),
		eventstore.OnEvent(PaymentProcessedEvent, applyPayment),
		eventstore.OnEvent(OrderShippedEvent, applyShipped),
		eventstore.OnEvent(OrderDeliveredEvent, applyDelivered),
		eventstore.OnEvent(OrderRefundedEvent, applyRefunded),
	)
}

// transition checks that an event may follow the current status.
func transition(s Order, from []Status, to string) error {
	for _, f := range from {
		if s.Status == f {
			return nil
		}
	}
	if s.Status == StatusNone {
		return eventstore.RejectWith(ErrNotPlaced, "%s on an order that was never placed", to)
	}
	return eventstore.RejectWith(ErrOutOfTurn, "%s not allowed when the order is %s", to, s.Status)
}

func applyPlaced(s Order, d OrderPlacedData, _ *eventstore.Outbox) (Order, error) {
	if err := transition(s, []Status{StatusNone}, OrderPlaced); err != nil {
		return s, err
	}
	s.Status, s.Customer, s.Total = StatusPlaced, d.Customer, d.Total
	return s, nil
}

func applyPayment(s Order, d PaymentProcessedData, _ *eventstore.Outbox) (Order, error) {
	if err := transition(s, []Status{StatusPlaced}, PaymentProcessed); err != nil {
		return s, err
	}
	if d.Amount != s.Total {
		return s, eventstore.RejectWith(ErrPaymentMismatch, "payment of %d does not match the total %d", d.Amount, s.Total)
	}
	s.Status, s.Paid = StatusPaid, d.Amount
	return s, nil
}

func applyShipped(s Order, d OrderShippedData, _ *eventstore.Outbox) (Order, error) {
	if err := transition(s, []Status{StatusPaid}, OrderShipped); err != nil {
		return s, err
	}
	s.Status, s.TrackingNumber = StatusShipped, d.TrackingNumber
	return s, nil
}

func applyDelivered(s Order, _ struct{}, _ *eventstore.Outbox) (Order, error) {
	if err := transition(s, []Status{StatusShipped}, OrderDelivered); err != nil {
		return s, err
	}
	s.Status = StatusDelivered
	return s, nil
}

func applyRefunded(s Order, d OrderRefundedData, out *eventstore.Outbox) (Order, error) {
	if err := transition(s, []Status{StatusPaid, StatusShipped, StatusDelivered}, OrderRefunded); err != nil {
		return s, err
	}
	if d.Amount <= 0 || d.Amount > s.Paid-s.Refunded {
		return s, eventstore.RejectWith(ErrRefundTooLarge, "refund of %d exceeds the refundable %d", d.Amount, s.Paid-s.Refunded)
	}
	s.Refunded += d.Amount
	if s.Refunded == s.Paid {
		s.Status = StatusRefunded
	}
	out.Publish(OutboundOrderRefunded, d)
	return s, nil
}
