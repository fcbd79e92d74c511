package kafkabroker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eventpipe/eventpipe/eventstore"
)

// The group guard works around two defects of the classic consumer-group
// coordinator of the pinned kfake (groups.go), which stall a group after
// members crash during a rebalance:
//
//  1. A member waiting for its JoinGroup or SyncGroup answer keeps its
//     session timer running (Kafka suspends it: such a member is bounded
//     by the rebalance timeout instead). When the timer fires, kfake
//     removes the member without answering the request it is waiting on,
//     so a live client hangs until its own request timeout (30 s in
//     sarama), then rejoins as a new member and restarts the rebalance.
//  2. A new member has no running session timer while it waits in the
//     join barrier (kfake stops its pending-member timer when it enters,
//     and a JoinGroup v0-v3 never starts one); the timer is armed only
//     when kfake hands the member an answer. If the client died while it
//     waited, handing over the answer can fail, and then the member never
//     expires: kfake counts it as joined, it receives partitions in the
//     next generation and holds them until some later rebalance happens
//     to drop it.
//
// kfake lets us supply its listener (kfake.ListenFn), so the guard sees
// every client connection and the group requests and answers on it,
// without changing kfake. Over its own client connection it then does
// what a Kafka coordinator would do:
//
//   - while a member waits for a JoinGroup or SyncGroup answer on a live
//     connection, it heartbeats for the member, which keeps kfake from
//     expiring it (and arms the session timer of a new member, so that
//     if the client dies later the member does expire);
//   - when the connection a member's JoinGroup waits on closes, the
//     answer can never arrive: it removes the member with a LeaveGroup at
//     once instead of letting kfake count a dead member as joined; the
//     same when the connection closes after the JoinGroup answer but
//     before the member sent its SyncGroup, which it now never will (a
//     JoinGroup v0-v3, which sarama sends when it speaks Kafka 2.1, names
//     no member id: the guard finds that member by the client address it
//     joined from, which kfake reports in DescribeGroups);
//   - if kfake nevertheless answers such a heartbeat with
//     UNKNOWN_MEMBER_ID (the member was dropped while waiting), it closes
//     the member's connection, so the client fails fast and rejoins
//     instead of waiting out its request timeout.
//
// A member that crashes while it holds partitions is still expired by its
// session timeout, exactly as Kafka does.

// guardClientID marks the guard's own requests so that it does not track
// them as a member's.
const guardClientID = "eventpipe-kafkabroker-group-guard"

// Kafka request keys the guard decodes.
const (
	keyJoinGroup  = 11
	keyHeartbeat  = 12
	keyLeaveGroup = 13
	keySyncGroup  = 14
)

// maxGroupFrame bounds the group requests and answers the guard decodes
// (a JoinGroup answer lists every member's subscription).
const maxGroupFrame = 4 << 20

type waitKind int8

const (
	waitNone waitKind = iota
	waitJoin          // waits for its JoinGroup answer
	syncDue           // has its JoinGroup answer; its SyncGroup is due
	waitSync          // waits for its SyncGroup answer
)

func (k waitKind) String() string {
	switch k {
	case waitJoin:
		return "JoinGroup"
	case syncDue:
		return "its own SyncGroup"
	case waitSync:
		return "SyncGroup"
	default:
		return "nothing"
	}
}

// groupGuardConfig tunes the guard; zero values take the defaults.
type groupGuardConfig struct {
	// KeepAliveAfter is how long a member waits for a JoinGroup or
	// SyncGroup answer before the guard heartbeats for it (default
	// 500ms; a rebalance without a crash is usually over by then).
	KeepAliveAfter time.Duration
	// KeepAliveEvery is the pause between those heartbeats (default 1s,
	// well below kfake's minimum session timeout of 6 s).
	KeepAliveEvery time.Duration
	// RequestTimeout bounds each request of the guard (default 5s).
	RequestTimeout time.Duration
	Logger         *slog.Logger
	// TLS, when set, is the server side of the listener: listen wraps
	// the TCP listener in it below the guard, so the guard taps the
	// plaintext frames.
	TLS *tls.Config
	// ClientOpts are added to the guard's own client (TLS trust and SASL
	// credentials of a secured broker).
	ClientOpts []kgo.Opt
}

func (c *groupGuardConfig) setDefaults() {
	if c.KeepAliveAfter == 0 {
		c.KeepAliveAfter = 500 * time.Millisecond
	}
	if c.KeepAliveEvery == 0 {
		c.KeepAliveEvery = time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// groupGuard is installed with kfake.ListenFn(g.listen) and started with
// run once the cluster listens.
type groupGuard struct {
	cfg groupGuardConfig

	mu     sync.Mutex
	groups map[string]*guardedGroup
	evict  []memberRef // members to remove with a LeaveGroup
	wake   chan struct{}
}

type guardedGroup struct {
	// generation is kfake's current generation of the group as far as
	// the answers seen tell (a new group starts at 0).
	generation int32
	// members are the members waiting for an answer.
	members map[string]*guardedMember
	seen    time.Time // the last request or answer of the group
}

// guardForgetAfter is how long the guard remembers a group in which no
// member waits.
const guardForgetAfter = 10 * time.Minute

type guardedMember struct {
	// waiting is the request the member waits on, if any.
	waiting  waitKind
	conn     *guardConn // the connection it waits on
	corr     int32      // the waiting request's correlation id
	since    time.Time  // when the member started waiting
	lastKept time.Time  // the guard's last heartbeat for it
}

type memberRef struct {
	group, member string
	// host, when member is empty, selects the members that joined from
	// this client address (kfake's ClientHost of a member).
	host   string
	reason string
	// tries counts the lookups by host that found no member yet (the
	// JoinGroup may still be queued in kfake).
	tries int
}

// Validate reports the first invalid field.
func (c groupGuardConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("kafkabroker: group guard config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.KeepAliveAfter < 0:
		return bad("KeepAliveAfter", "%v is negative", c.KeepAliveAfter)
	case c.KeepAliveEvery <= 0:
		return bad("KeepAliveEvery", "%v must be positive", c.KeepAliveEvery)
	case c.RequestTimeout <= 0:
		return bad("RequestTimeout", "%v must be positive", c.RequestTimeout)
	}
	return nil
}

func newGroupGuard(cfg groupGuardConfig) (*groupGuard, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &groupGuard{cfg: cfg, groups: map[string]*guardedGroup{}, wake: make(chan struct{}, 1)}, nil
}

// listen is a kfake.ListenFn: the listener kfake gets hands it guarded
// connections.
func (g *groupGuard) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	if g.cfg.TLS != nil {
		ln = tls.NewListener(ln, g.cfg.TLS)
	}
	return &guardListener{Listener: ln, g: g}, nil
}

type guardListener struct {
	net.Listener
	g *groupGuard
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &guardConn{Conn: c, g: l.g, sent: map[int32]sentRequest{}, waiters: map[memberRef]struct{}{}, anonJoins: map[int32]string{}}
	gc.in = frameTap{headLen: 8, want: gc.wantRequest, deliver: gc.deliverRequest}
	gc.out = frameTap{headLen: 4, want: gc.wantResponse, deliver: gc.deliverResponse}
	return gc, nil
}

// guardConn is a client connection as kfake sees it. Reads carry the
// client's requests, writes kfake's answers; both are tapped.
type guardConn struct {
	net.Conn
	g *groupGuard

	in  frameTap // requests; only kfake's read goroutine feeds it
	out frameTap // answers; only kfake's write goroutine feeds it

	mu   sync.Mutex
	sent map[int32]sentRequest // group requests awaiting their answer, by correlation id

	waiters map[memberRef]struct{} // members waiting on this connection; guarded by g.mu
	// anonJoins are JoinGroups without a member id (protocol v0-v3, or
	// a static member) awaiting their answer, by correlation id: kfake
	// adds such a member to the group at once, under an id only the
	// answer names. Guarded by g.mu.
	anonJoins map[int32]string

	closeOnce sync.Once
}

// sentRequest is what the guard keeps of a group request until its
// answer: the decoded request shares the frame buffer, which is reused.
type sentRequest struct {
	key, version  int16
	group, member string
	generation    int32
}

func (r sentRequest) responseKind() kmsg.Response {
	req := kmsg.RequestForKey(r.key)
	req.SetVersion(r.version)
	return req.ResponseKind()
}

func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.feed(p[:n])
	if err != nil {
		c.closed()
	}
	return n, err
}

// Write taps an answer before it goes out: once the client has it, it
// may send its next request, which the guard must see after the answer.
func (c *guardConn) Write(p []byte) (int, error) {
	c.out.feed(p)
	n, err := c.Conn.Write(p)
	if err != nil {
		c.closed()
	}
	return n, err
}

func (c *guardConn) Close() error {
	c.closed()
	return c.Conn.Close()
}

func (c *guardConn) closed() {
	c.closeOnce.Do(func() { c.g.connClosed(c) })
}

func (c *guardConn) wantRequest(head []byte) bool {
	if len(head) < 2 {
		return false
	}
	switch int16(binary.BigEndian.Uint16(head)) {
	case keyJoinGroup, keyHeartbeat, keyLeaveGroup, keySyncGroup:
		return true
	}
	return false
}

func (c *guardConn) deliverRequest(frame []byte) {
	r := kbin.Reader{Src: frame}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	clientID := r.NullableString()
	if r.Complete() != nil || (clientID != nil && *clientID == guardClientID) {
		return
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		return
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if r.Complete() != nil || req.ReadFrom(r.Src) != nil {
		return
	}
	sent := sentRequest{key: key, version: version}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		sent.group, sent.member = r.Group, r.MemberID
	case *kmsg.SyncGroupRequest:
		sent.group, sent.member, sent.generation = r.Group, r.MemberID, r.Generation
	case *kmsg.HeartbeatRequest:
		sent.group, sent.member, sent.generation = r.Group, r.MemberID, r.Generation
	case *kmsg.LeaveGroupRequest:
		c.g.request(c, corr, req)
		return // its answer changes nothing
	default:
		return
	}
	c.mu.Lock()
	c.sent[corr] = sent
	c.mu.Unlock()
	c.g.request(c, corr, req)
}

func (c *guardConn) wantResponse(head []byte) bool {
	if len(head) < 4 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sent[int32(binary.BigEndian.Uint32(head))]
	return ok
}

func (c *guardConn) deliverResponse(frame []byte) {
	r := kbin.Reader{Src: frame}
	corr := r.Int32()
	c.mu.Lock()
	sent, ok := c.sent[corr]
	delete(c.sent, corr)
	c.mu.Unlock()
	if !ok || r.Complete() != nil {
		return
	}
	resp := sent.responseKind()
	if resp.IsFlexible() {
		kmsg.SkipTags(&r) // response header v1
	}
	if r.Complete() != nil || resp.ReadFrom(r.Src) != nil {
		return
	}
	c.g.answer(c, corr, sent, resp)
}

// frameTap splits a byte stream into Kafka frames (a 4-byte size, then
// the frame). It looks at the first headLen bytes of each frame and keeps
// and delivers the whole frame only when want says so; other frames
// (produce, fetch) are skipped without copying.
type frameTap struct {
	headLen int
	want    func(head []byte) bool
	deliver func(frame []byte)

	size    [4]byte
	sizeN   int
	left    int // bytes of the current frame still to come
	total   int
	decided bool
	keep    bool
	buf     []byte
}

func (t *frameTap) feed(p []byte) {
	for len(p) > 0 {
		if t.left == 0 {
			n := copy(t.size[t.sizeN:], p)
			t.sizeN += n
			p = p[n:]
			if t.sizeN < 4 {
				return
			}
			t.sizeN = 0
			size := int(int32(binary.BigEndian.Uint32(t.size[:])))
			if size <= 0 {
				continue
			}
			t.left, t.total, t.decided, t.keep, t.buf = size, size, false, false, t.buf[:0]
			continue
		}
		chunk := p[:min(len(p), t.left)]
		p = p[len(chunk):]
		t.left -= len(chunk)
		if !t.decided {
			take := min(t.headLen-len(t.buf), len(chunk))
			t.buf = append(t.buf, chunk[:take]...)
			chunk = chunk[take:]
			if len(t.buf) < t.headLen && t.left > 0 {
				continue
			}
			t.decided = true
			t.keep = t.total <= maxGroupFrame && t.want(t.buf)
		}
		if t.keep {
			t.buf = append(t.buf, chunk...)
		}
		if t.left == 0 {
			if t.keep {
				t.deliver(t.buf)
			}
			t.buf = t.buf[:0]
			if cap(t.buf) > 64<<10 {
				t.buf = nil // do not pin a large JoinGroup answer per connection
			}
		}
	}
}

func (g *groupGuard) group(name string, now time.Time) *guardedGroup {
	gg := g.groups[name]
	if gg == nil {
		gg = &guardedGroup{members: map[string]*guardedMember{}}
		g.groups[name] = gg
	}
	gg.seen = now
	return gg
}

// wait records that member waits on request corr on c.
func (g *groupGuard) wait(c *guardConn, group, member string, kind waitKind, corr int32, now time.Time) {
	g.group(group, now).members[member] = &guardedMember{waiting: kind, conn: c, corr: corr, since: now}
	c.waiters[memberRef{group: group, member: member}] = struct{}{}
}

// stopWaiting forgets member if it still waits on request corr on c.
func (g *groupGuard) stopWaiting(c *guardConn, group, member string, corr int32) {
	gg := g.groups[group]
	if gg == nil {
		return
	}
	if m := gg.members[member]; m != nil && m.conn == c && m.corr == corr {
		delete(gg.members, member)
		delete(c.waiters, memberRef{group: group, member: member})
	}
}

// forget stops tracking member, whatever it waits on.
func (g *groupGuard) forget(group, member string) {
	gg := g.groups[group]
	if gg == nil {
		return
	}
	if m := gg.members[member]; m != nil {
		delete(m.conn.waiters, memberRef{group: group, member: member})
		delete(gg.members, member)
	}
}

// request records a group request read from a client connection.
func (g *groupGuard) request(c *guardConn, corr int32, req kmsg.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		if r.MemberID == "" {
			// With protocol v4+ kfake answers at once with the id to
			// join with; before v4 (sarama speaking Kafka 2.1, say)
			// the member waits in the barrier without a known id.
			c.anonJoins[corr] = r.Group
			return
		}
		g.forget(r.Group, r.MemberID)
		g.wait(c, r.Group, r.MemberID, waitJoin, corr, now)
	case *kmsg.SyncGroupRequest:
		g.forget(r.Group, r.MemberID)
		g.wait(c, r.Group, r.MemberID, waitSync, corr, now)
	case *kmsg.HeartbeatRequest:
		// A member that heartbeats is past its SyncGroup.
		if gg := g.groups[r.Group]; gg != nil {
			if m := gg.members[r.MemberID]; m != nil && m.waiting == syncDue {
				g.forget(r.Group, r.MemberID)
			}
		}
	case *kmsg.LeaveGroupRequest:
		g.forget(r.Group, r.MemberID)
		for _, lm := range r.Members {
			g.forget(r.Group, lm.MemberID)
		}
	}
}

// answer records kfake's answer to a group request.
func (g *groupGuard) answer(c *guardConn, corr int32, req sentRequest, resp kmsg.Response) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		delete(c.anonJoins, corr)
		g.stopWaiting(c, req.group, req.member, corr)
		if r.ErrorCode == 0 {
			g.group(req.group, now).generation = r.Generation
			g.forget(req.group, r.MemberID)
			g.wait(c, req.group, r.MemberID, syncDue, corr, now)
		}
	case *kmsg.SyncGroupResponse:
		g.stopWaiting(c, req.group, req.member, corr)
		if r.ErrorCode == 0 {
			g.group(req.group, now).generation = req.generation
		}
	case *kmsg.HeartbeatResponse:
		// kfake checks a heartbeat's generation before anything else
		// but the member, so these two answers confirm it.
		if r.ErrorCode == 0 || r.ErrorCode == kerr.RebalanceInProgress.Code {
			g.group(req.group, now).generation = req.generation
		}
	}
}

// connClosed handles a client connection that closed. A member whose
// JoinGroup waits on it can never get its answer, and one that got its
// JoinGroup answer but had not sent its SyncGroup never will: both are
// queued for removal (the second would otherwise hold the group for the
// rebalance timeout if it was the leader, or take partitions it never
// consumes). A member waiting for its SyncGroup answer is left to its
// session timeout, which kfake armed when it answered the JoinGroup
// (removing it now would skew kfake's count of joined members and hold
// the next rebalance for a full rebalance timeout).
func (g *groupGuard) connClosed(c *guardConn) {
	g.mu.Lock()
	queued := false
	for ref := range c.waiters {
		if gg := g.groups[ref.group]; gg != nil {
			if m := gg.members[ref.member]; m != nil && m.conn == c {
				switch m.waiting {
				case waitJoin:
					ref.reason = "its connection closed while it waited for its JoinGroup answer"
				case syncDue:
					ref.reason = "its connection closed before it sent its SyncGroup"
				}
				if ref.reason != "" {
					ref.host = c.RemoteAddr().String()
					g.evict = append(g.evict, ref)
					queued = true
				}
				delete(gg.members, ref.member)
			}
		}
	}
	clear(c.waiters)
	for _, group := range c.anonJoins {
		g.evict = append(g.evict, memberRef{group: group, host: c.RemoteAddr().String(),
			reason: "its connection closed while it waited for its first JoinGroup answer"})
		queued = true
	}
	clear(c.anonJoins)
	g.mu.Unlock()
	if queued {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

// queueEviction queues e and wakes the worker.
func (g *groupGuard) queueEviction(e memberRef) {
	g.mu.Lock()
	g.evict = append(g.evict, e)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// expire drops the groups no member waited in for a while. Their
// generation is learnt again from the members' next answers.
func (g *groupGuard) expire(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, gg := range g.groups {
		if len(gg.members) == 0 && now.Sub(gg.seen) > guardForgetAfter {
			delete(g.groups, name)
		}
	}
}

type keepAlive struct {
	group, member string
	generation    int32
	conn          *guardConn
	corr          int32
	waiting       waitKind
}

// due returns the waiting members to heartbeat for now and the members
// to evict.
func (g *groupGuard) due(now time.Time) (keep []keepAlive, evict []memberRef) {
	g.mu.Lock()
	defer g.mu.Unlock()
	evict, g.evict = g.evict, nil
	for name, gg := range g.groups {
		for id, m := range gg.members {
			if (m.waiting != waitJoin && m.waiting != waitSync) || now.Sub(m.since) < g.cfg.KeepAliveAfter || now.Sub(m.lastKept) < g.cfg.KeepAliveEvery {
				continue
			}
			m.lastKept = now
			keep = append(keep, keepAlive{group: name, member: id, generation: gg.generation, conn: m.conn, corr: m.corr, waiting: m.waiting})
		}
	}
	return keep, evict
}

// stillWaiting reports whether the member still waits on the same request.
func (g *groupGuard) stillWaiting(k keepAlive) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	gg := g.groups[k.group]
	if gg == nil {
		return false
	}
	m := gg.members[k.member]
	return m != nil && m.conn == k.conn && m.corr == k.corr && m.waiting == k.waiting
}

// run sends the guard's requests to the broker at addr until ctx ends.
func (g *groupGuard) run(ctx context.Context, addr string) error {
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(guardClientID), kgo.RetryTimeout(g.cfg.RequestTimeout)}, g.cfg.ClientOpts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafkabroker: group guard client for %s: %w", addr, err)
	}
	defer client.Close()
	tick := time.NewTicker(g.cfg.KeepAliveEvery / 4)
	defer tick.Stop()
	lastExpire := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-g.wake:
		}
		now := time.Now()
		if now.Sub(lastExpire) > time.Minute {
			g.expire(now)
			lastExpire = now
		}
		keep, evict := g.due(now)
		for _, e := range evict {
			g.leave(ctx, client, e)
		}
		for _, k := range keep {
			g.heartbeat(ctx, client, k)
		}
	}
}

func (g *groupGuard) leave(ctx context.Context, client *kgo.Client, e memberRef) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	if e.member == "" {
		ids, err := g.membersFrom(ctx, client, e.group, e.host)
		if err != nil {
			g.cfg.Logger.Warn("could not find the members of a closed connection; their session timeout will remove them", "group", e.group, "client", e.host, "err", err)
			return
		}
		if len(ids) == 0 && e.tries < 3 {
			e.tries++
			time.AfterFunc(300*time.Millisecond, func() { g.queueEviction(e) })
			return
		}
		for _, id := range ids {
			e.member = id
			g.leave(ctx, client, e)
		}
		return
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = e.group, e.member
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = e.member
	reason := "eventpipe broker: " + e.reason
	lm.Reason = &reason
	req.Members = []kmsg.LeaveGroupRequestMember{lm}
	resp, err := req.RequestWith(ctx, client)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && len(resp.Members) == 1 {
		err = kerr.ErrorForCode(resp.Members[0].ErrorCode)
	}
	switch {
	case err == nil:
		g.cfg.Logger.Info("removed a consumer-group member that can no longer answer", "group", e.group, "member", e.member, "client", e.host, "reason", e.reason)
	case errors.Is(err, kerr.UnknownMemberID):
		// Gone already.
	default:
		g.cfg.Logger.Warn("could not remove a dead consumer-group member; its session timeout will", "group", e.group, "member", e.member, "err", err)
	}
}

// membersFrom returns the members of group that joined from host.
func (g *groupGuard) membersFrom(ctx context.Context, client *kgo.Client, group, host string) ([]string, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, dg := range resp.Groups {
		if err := kerr.ErrorForCode(dg.ErrorCode); err != nil {
			return nil, err
		}
		for _, m := range dg.Members {
			if m.ClientHost == host {
				ids = append(ids, m.MemberID)
			}
		}
	}
	return ids, nil
}

func (g *groupGuard) heartbeat(ctx context.Context, client *kgo.Client, k keepAlive) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = k.group, k.member, k.generation
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		g.cfg.Logger.Debug("group guard heartbeat failed", "group", k.group, "member", k.member, "err", err)
		return
	}
	if resp.ErrorCode != kerr.UnknownMemberID.Code || !g.stillWaiting(k) {
		return
	}
	// kfake dropped the member while it waited and will never answer
	// the request: close the connection so that the client fails the
	// request now and rejoins.
	g.cfg.Logger.Warn("closing the connection of a consumer-group member the coordinator dropped while it waited; it will rejoin",
		"group", k.group, "member", k.member, "waiting_for", k.waiting.String(), "client", k.conn.RemoteAddr().String())
	_ = k.conn.Close()
}
