package kafka

// SubscriptionCount returns how many subscriptions s would stop on Close.
func SubscriptionCount(s *Subscriber) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// IsClosedConn exposes isClosedConn to the tests.
var IsClosedConn = isClosedConn
