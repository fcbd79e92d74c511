package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/eventpipe/eventpipe/eventstore"
)

// RawMemberConfig configures a RawMember.
type RawMemberConfig struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// Group is the consumer group to join. Required.
	Group string
	// Topic is the one topic the member subscribes to (default "t").
	Topic string
	// SessionTimeout (default 10s) and RebalanceTimeout (default 10s)
	// go into every JoinGroup.
	SessionTimeout, RebalanceTimeout time.Duration
	// Kafka21 makes the member speak Kafka 2.1's protocol versions, as
	// eventpipe's sarama clients do: its first JoinGroup carries no
	// member id and waits in the join barrier (JoinGroup v3).
	Kafka21 bool
}

func (c *RawMemberConfig) setDefaults() {
	if c.Topic == "" {
		c.Topic = "t"
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 10 * time.Second
	}
}

// Validate reports the first invalid field.
func (c RawMemberConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("kafkatest: RawMemberConfig: %w", &eventstore.ValidationError{Field: "Brokers", Reason: "is empty"})
	}
	if c.Group == "" {
		return fmt.Errorf("kafkatest: RawMemberConfig: %w", &eventstore.ValidationError{Field: "Group", Reason: "is empty"})
	}
	return nil
}

// RawMember is a classic consumer-group member that a test drives one
// request at a time (JoinGroup, SyncGroup, Heartbeat), through its own
// client and so its own connections: Die closes them as a killed process
// would, and a member that sends no Heartbeat is one that hangs. It sends
// nothing by itself.
type RawMember struct {
	cfg    RawMemberConfig
	tb     testing.TB
	client *kgo.Client
	dead   bool

	// ID is the member id the coordinator gave; a test may set it when
	// it learnt the id otherwise (a JoinGroup v3 that never returned).
	ID string
	// Generation and Leader are from the last JoinGroup answer.
	Generation int32
	Leader     bool
	members    []kmsg.JoinGroupResponseMember
}

// NewRawMember returns a member that has not joined yet; its connections
// are closed when tb ends.
func NewRawMember(tb testing.TB, cfg RawMemberConfig) *RawMember {
	tb.Helper()
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	// A generous overhead: a JoinGroup that is never answered must not
	// time out on the client side while a test waits for it.
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.RequestTimeoutOverhead(60 * time.Second)}
	if cfg.Kafka21 {
		opts = append(opts, kgo.MaxVersions(kversion.V2_1_0()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		tb.Fatalf("kafka client for %v: %v", cfg.Brokers, err)
	}
	m := &RawMember{cfg: cfg, tb: tb, client: client}
	tb.Cleanup(m.Die)
	return m
}

// Die closes the member's connections without leaving the group, as a
// kill -9 of its process does. A request waiting for its answer fails.
func (m *RawMember) Die() {
	if !m.dead {
		m.dead = true
		m.client.Close()
	}
}

func (m *RawMember) joinRequest() *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID = m.cfg.Group, m.ID
	req.SessionTimeoutMillis = int32(m.cfg.SessionTimeout / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(m.cfg.RebalanceTimeout / time.Millisecond)
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{m.cfg.Topic}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return req
}

// RequestMemberID makes the first JoinGroup of protocol v4+, which only
// hands out the member id (KIP-394); it fails tb otherwise.
func (m *RawMember) RequestMemberID(ctx context.Context) {
	m.tb.Helper()
	resp, err := m.joinRequest().RequestWith(ctx, m.client)
	if err != nil {
		m.tb.Fatalf("first JoinGroup to %s: %v", m.cfg.Group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.MemberIDRequired) {
		m.tb.Fatalf("first JoinGroup to %s: %v, want MEMBER_ID_REQUIRED", m.cfg.Group, err)
	}
	m.ID = resp.MemberID
}

// Join sends a JoinGroup (with the member's id, if it has one) and waits
// for the answer.
func (m *RawMember) Join(ctx context.Context) (*kmsg.JoinGroupResponse, error) {
	resp, err := m.joinRequest().RequestWith(ctx, m.client)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return nil, fmt.Errorf("join %s as %q: %w", m.cfg.Group, m.ID, err)
	}
	m.ID, m.Generation, m.Leader, m.members = resp.MemberID, resp.Generation, resp.LeaderID == resp.MemberID, resp.Members
	return resp, nil
}

// JoinAndSync joins (alone, or with members that are joining too) and
// syncs; it fails tb on an error.
func (m *RawMember) JoinAndSync(ctx context.Context) {
	m.tb.Helper()
	if !m.cfg.Kafka21 {
		m.RequestMemberID(ctx)
	}
	if _, err := m.Join(ctx); err != nil {
		m.tb.Fatal(err)
	}
	if err := m.Sync(ctx); err != nil {
		m.tb.Fatal(err)
	}
}

// Sync sends the SyncGroup of the last generation joined and waits for
// the answer; a leader assigns every member partition 0 of the topic.
func (m *RawMember) Sync(ctx context.Context) error {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = m.cfg.Group, m.ID, m.Generation
	if m.Leader {
		for _, jm := range m.members {
			a := kmsg.NewConsumerMemberAssignment()
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = m.cfg.Topic, []int32{0}
			a.Topics = []kmsg.ConsumerMemberAssignmentTopic{at}
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = jm.MemberID, a.AppendTo(nil)
			req.GroupAssignment = append(req.GroupAssignment, ga)
		}
	}
	resp, err := req.RequestWith(ctx, m.client)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("sync %s as %s: %w", m.cfg.Group, m.ID, err)
	}
	return nil
}

// Heartbeat sends one Heartbeat and returns the coordinator's error.
func (m *RawMember) Heartbeat(ctx context.Context) error {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = m.cfg.Group, m.ID, m.Generation
	resp, err := req.RequestWith(ctx, m.client)
	if err != nil {
		return fmt.Errorf("heartbeat %s as %s: %w", m.cfg.Group, m.ID, err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}
