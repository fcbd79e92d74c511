package keyed

import (
	"context"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
)

// groupHandler is the sarama handler of one Consume call: it runs a
// partition per claim and a committer per session.
type groupHandler struct {
	cfg  *Config
	ctx  context.Context // parent of the message contexts
	out  chan<- *message.Message
	stop <-chan struct{}

	mu        sync.Mutex
	committer *committer
}

// Setup starts the session's committer.
func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	c := &committer{sess: sess, interval: h.cfg.CommitInterval, parts: map[*partition]struct{}{},
		want: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
	go c.run()
	h.mu.Lock()
	h.committer = c
	h.mu.Unlock()
	return nil
}

// Cleanup stops the committer once every claim has returned; sarama then
// commits the marked offsets one last time.
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	c := h.committer
	h.committer = nil
	h.mu.Unlock()
	if c != nil {
		close(c.done)
		<-c.exited
	}
	return nil
}

// ConsumeClaim runs the claimed partition until it is revoked.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	h.mu.Lock()
	c := h.committer
	h.mu.Unlock()
	p := newPartition(h.ctx, h.cfg, sess, claim.Topic(), claim.Partition(), h.out, c.ask)
	c.add(p)
	defer c.remove(p)
	h.cfg.Logger.Debug("Partition claimed", p.logFields.Add(map[string]any{"kafka_initial_offset": claim.InitialOffset()}))
	return p.run(claim, h.stop)
}

// committer commits a session's marked offsets every interval and when a
// partition asks, and tells each partition what the commit covered.
type committer struct {
	sess     sarama.ConsumerGroupSession
	interval time.Duration
	want     chan struct{}
	done     chan struct{}
	exited   chan struct{}

	mu    sync.Mutex
	parts map[*partition]struct{}
}

func (c *committer) add(p *partition) {
	c.mu.Lock()
	c.parts[p] = struct{}{}
	c.mu.Unlock()
}

func (c *committer) remove(p *partition) {
	c.mu.Lock()
	delete(c.parts, p)
	c.mu.Unlock()
}

// ask requests a commit soon, without blocking.
func (c *committer) ask() {
	select {
	case c.want <- struct{}{}:
	default:
	}
}

func (c *committer) run() {
	defer close(c.exited)
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		case <-c.want:
		}
		c.commit()
	}
}

// commit commits what the partitions marked. A partition learns that its
// marks up to the offset read before the commit are committed; marks made
// meanwhile are committed too but counted by the next commit. sarama
// reports a failed commit on the group's error channel and retries it
// with the next one; the partition counts it as committed all the same.
func (c *committer) commit() {
	c.mu.Lock()
	marks := make(map[*partition]int64, len(c.parts))
	for p := range c.parts {
		if m, dirty := p.commitMark(); dirty {
			marks[p] = m
		}
	}
	c.mu.Unlock()
	if len(marks) == 0 {
		return
	}
	c.sess.Commit()
	for p, m := range marks {
		p.committedUpTo(m)
	}
}
