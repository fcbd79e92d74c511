package keyed

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka"
)

// entry is one record of a partition's window: read, and not known to be
// committed.
type entry struct {
	offset int64
	ctx    context.Context  // parent of each delivery's context: partition and offset
	msg    *message.Message // nil once acked
	acked  bool
}

// keyQueue holds a key's records that are not yet acked, in offset order;
// its worker delivers the first one.
type keyQueue struct {
	waiting []*entry
}

// partition is one claimed partition: the window of records read past its
// last commit and one worker per key with records waiting. A worker hands
// its key's records to the output channel one at a time, each after the
// previous one was acked, so a partition has as many messages in flight
// as it has keys with work, up to MaxInFlight.
type partition struct {
	topic     string
	id        int32
	cfg       *Config
	logFields watermill.LogFields
	sess      sarama.ConsumerGroupSession
	out       chan<- *message.Message
	askCommit func()

	ctx      context.Context // parent of the message contexts
	cancel   context.CancelFunc
	draining chan struct{} // closed when revoked: hand out nothing more
	abandon  chan struct{} // closed when the revoke stops waiting for acks
	wake     chan struct{} // the window or the in-flight count changed
	workers  sync.WaitGroup

	mu        sync.Mutex
	window    []*entry // in offset order, from the oldest not known committed
	acked     int      // leading entries of window that are acked
	marked    int64    // the offset marked (next to read), -1 before the first
	committed int64    // the offset last committed, -1 before the first
	inFlight  int      // being handed out or handed out, neither acked nor nacked
	keys      map[string]*keyQueue
}

func newPartition(ctx context.Context, cfg *Config, sess sarama.ConsumerGroupSession, topic string, id int32, out chan<- *message.Message, askCommit func()) *partition {
	ctx, cancel := context.WithCancel(ctx)
	return &partition{
		topic: topic, id: id, cfg: cfg, sess: sess, out: out, askCommit: askCommit,
		logFields: watermill.LogFields{"topic": topic, "consumer_group": cfg.ConsumerGroup, "kafka_partition": id},
		ctx:       ctx, cancel: cancel,
		draining: make(chan struct{}), abandon: make(chan struct{}), wake: make(chan struct{}, 1),
		marked: -1, committed: -1,
		keys: map[string]*keyQueue{},
	}
}

// run reads the claim until it is revoked, the session ends or stop is
// closed, then revokes the partition (see revoke). It reads a record only
// while the window has room.
func (p *partition) run(claim sarama.ConsumerGroupClaim, stop <-chan struct{}) error {
	records := claim.Messages()
	var err error
read:
	for {
		in := records
		if p.full() {
			in = nil
		}
		select {
		case rec, ok := <-in:
			if !ok {
				break read
			}
			if err = p.add(rec); err != nil {
				break read
			}
		case <-p.wake:
		case <-p.sess.Context().Done():
			break read
		case <-stop:
			break read
		}
	}
	p.revoke()
	return err
}

// full reports whether the window has no room for another record, and
// asks for a commit when acked records take up half of it.
func (p *partition) full() bool {
	p.mu.Lock()
	full := len(p.window) >= p.cfg.MaxInFlight
	ask := p.acked > 0 && (full || p.acked >= max(1, p.cfg.MaxInFlight/2))
	p.mu.Unlock()
	if ask {
		p.askCommit()
	}
	return full
}

// add decodes rec, appends it to the window and queues it behind its key,
// starting the key's worker if it has none.
func (p *partition) add(rec *sarama.ConsumerMessage) error {
	msg, err := kafka.Marshaler.Unmarshal(rec)
	if err != nil {
		return fmt.Errorf("keyed: unmarshal %s/%d at offset %d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	ctx := context.WithValue(context.WithValue(p.ctx, partitionKey, rec.Partition), offsetKey, rec.Offset)
	e := &entry{offset: rec.Offset, ctx: ctx, msg: msg}
	key := string(rec.Key)
	p.mu.Lock()
	p.window = append(p.window, e)
	q := p.keys[key]
	start := q == nil
	if start {
		q = &keyQueue{}
		p.keys[key] = q
	}
	q.waiting = append(q.waiting, e)
	p.mu.Unlock()
	if start {
		p.workers.Add(1)
		go p.work(key, q)
	}
	return nil
}

// work delivers key's records in order until none is waiting or the
// partition is revoked.
func (p *partition) work(key string, q *keyQueue) {
	defer p.workers.Done()
	for {
		p.mu.Lock()
		if len(q.waiting) == 0 || closed(p.draining) {
			delete(p.keys, key)
			p.mu.Unlock()
			return
		}
		e := q.waiting[0]
		p.mu.Unlock()
		if !p.deliver(e) {
			return
		}
		p.mu.Lock()
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		p.ackLocked(e)
		p.mu.Unlock()
		p.signal()
	}
}

// deliver hands e's message out until it is acked (true), handing it out
// again after each nack, or until the partition is revoked (false): a
// message not handed out yet, or nacked, is not handed out again; one in
// flight is waited for until the revoke abandons it.
func (p *partition) deliver(e *entry) bool {
	for {
		switch p.deliverOnce(e) {
		case acked:
			return true // the caller counts it
		case revoked:
			return false
		}
		// Nacked: hand out a fresh copy after the pause.
		if !p.sleep(p.cfg.NackResendSleep) {
			return false
		}
		e.msg = e.msg.Copy()
	}
}

// outcome is how one hand-out of a message ended.
type outcome int

const (
	acked outcome = iota
	nacked
	revoked
)

// deliverOnce hands e.msg out once, with a context of its own derived from
// the entry's, and waits for its ack or nack or the revoke that abandons
// it. That context is cancelled when deliverOnce returns: a message's
// context ends once it is acked or nacked (Watermill's contract), and a
// revoke cancels the entry's context anyway.
func (p *partition) deliverOnce(e *entry) outcome {
	msg := e.msg
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	msg.SetContext(ctx)
	// Counted from before the send, so that a revoke never misses a
	// message being handed out at that moment.
	p.mu.Lock()
	p.inFlight++
	p.mu.Unlock()
	if closed(p.draining) {
		p.dropInFlight()
		return revoked
	}
	select {
	case p.out <- msg:
	case <-p.draining:
		p.dropInFlight()
		return revoked
	}
	select {
	case <-msg.Acked():
		return acked
	case <-msg.Nacked():
		p.dropInFlight()
		return nacked
	case <-p.abandon:
		select {
		case <-msg.Acked(): // acked just in time
			return acked
		default:
			return revoked
		}
	}
}

// dropInFlight counts a message no longer in flight that was not acked.
func (p *partition) dropInFlight() {
	p.mu.Lock()
	p.inFlight--
	p.mu.Unlock()
	p.signal()
}

// sleep pauses for d, or until the partition is revoked (false).
func (p *partition) sleep(d time.Duration) bool {
	if d <= 0 {
		return !closed(p.draining)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.draining:
		return false
	}
}

// ackLocked records that e was acked and marks the offset past the
// acked prefix of the window: never past a record not acked.
func (p *partition) ackLocked(e *entry) {
	p.inFlight--
	e.acked = true
	e.msg = nil
	n := p.acked
	for n < len(p.window) && p.window[n].acked {
		n++
	}
	if n > p.acked {
		p.acked = n
		p.marked = p.window[n-1].offset + 1
		p.sess.MarkOffset(p.topic, p.id, p.marked, "")
	}
}

// commitMark returns the marked offset and whether it is past the last
// commit.
func (p *partition) commitMark() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.marked, p.marked > p.committed
}

// committedUpTo drops the records below mark, which a commit covered, from
// the window.
func (p *partition) committedUpTo(mark int64) {
	p.mu.Lock()
	n := 0
	for n < p.acked && p.window[n].offset < mark {
		n++
	}
	clear(p.window[:n])
	p.window = p.window[n:]
	p.acked -= n
	p.committed = max(p.committed, mark)
	p.mu.Unlock()
	p.signal()
}

// revoke stops handing out messages, waits up to RevokeTimeout for those
// in flight to be acked (their offsets are marked as the acks come), then
// abandons the rest: their contexts are cancelled and their offsets are
// never marked, so the partition's next owner gets them again. It returns
// once every worker has exited.
func (p *partition) revoke() {
	close(p.draining)
	timer := time.NewTimer(p.cfg.RevokeTimeout)
	defer timer.Stop()
wait:
	for {
		p.mu.Lock()
		n := p.inFlight
		p.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-p.wake:
		case <-timer.C:
			p.cfg.Logger.Info("Revoked partition abandons messages still in flight", p.logFields.Add(watermill.LogFields{
				"in_flight": n, "after": p.cfg.RevokeTimeout.String()}))
			break wait
		}
	}
	close(p.abandon)
	p.cancel()
	p.workers.Wait()
	p.mu.Lock()
	p.cfg.Logger.Debug("Partition revoked", p.logFields.Add(watermill.LogFields{
		"marked": p.marked, "unacked": len(p.window) - p.acked}))
	p.mu.Unlock()
}

// signal wakes run (or revoke) without blocking.
func (p *partition) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
