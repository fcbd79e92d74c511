package keyed

import (
	"net"
	"sync"
)

// connTracker dials a subscription's connections (it is sarama's
// Net.Proxy.Dialer) and can close every one that is open, which fails the
// requests in flight: a JoinGroup waiting for a rebalance would otherwise
// hold a stop until the rebalance ends.
type connTracker struct {
	dialer net.Dialer
	mu     sync.Mutex
	open   map[*trackedConn]struct{}
}

// Dial implements sarama's proxy.Dialer.
func (t *connTracker) Dial(network, addr string) (net.Conn, error) {
	c, err := t.dialer.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	if t.open == nil {
		t.open = map[*trackedConn]struct{}{}
	}
	t.open[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

// closeAll closes every open connection and returns how many there were.
func (t *connTracker) closeAll() int {
	t.mu.Lock()
	conns := make([]*trackedConn, 0, len(t.open))
	for c := range t.open {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return len(conns)
}

type trackedConn struct {
	net.Conn
	t *connTracker
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	delete(c.t.open, c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}
