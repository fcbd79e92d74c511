package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/kafkatest"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// GroupMember is one member of a consumer group as its coordinator
// describes it.
type GroupMember struct {
	// ID is the member id the coordinator gave the member.
	ID string
	// ClientID is the client id of the member's JoinGroup request.
	ClientID string
	// ClientHost is the address the member joined from (host:port for the
	// local broker, which lets a test tell which process a member is).
	ClientHost string
	// Partitions is the member's assignment; the coordinator reports it
	// only while the group is Stable.
	Partitions map[string][]int32
}

// GroupSnapshot is a consumer group's state and members at one moment.
type GroupSnapshot struct {
	// State is the coordinator's name for the group state (Empty, Stable,
	// PreparingRebalance, CompletingRebalance, Dead).
	State string
	// Members are sorted by ID.
	Members []GroupMember
}

// String renders the snapshot on one line for test logs.
func (s GroupSnapshot) String() string {
	var b strings.Builder
	b.WriteString(s.State)
	for _, m := range s.Members {
		fmt.Fprintf(&b, " [%s %s", shortMemberID(m.ID), m.ClientHost)
		for topic, parts := range m.Partitions {
			fmt.Fprintf(&b, " %s:%v", topic, parts)
		}
		b.WriteString("]")
	}
	return b.String()
}

func shortMemberID(id string) string {
	if i := strings.LastIndexByte(id, '-'); i >= 0 && len(id)-i > 9 {
		return id[:i+9]
	}
	return id
}

// GroupObserver describes consumer groups through one Kafka admin
// client (kafka.OffsetReader), for tests that watch a group while its
// members come and go.
type GroupObserver struct {
	reader *kafka.OffsetReader
}

// NewGroupObserver connects to brokers (plain text) and closes the
// connection when tb ends; it fails tb when no broker answers.
func NewGroupObserver(tb testing.TB, brokers []string) *GroupObserver {
	tb.Helper()
	cluster := kafka.Cluster{Brokers: brokers}
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	if err := kafka.Ping(ctx, cluster); err != nil {
		tb.Fatalf("group observer: %v", err)
	}
	reader, err := kafka.NewOffsetReader(cluster)
	if err != nil {
		tb.Fatalf("group observer: %v", err)
	}
	tb.Cleanup(reader.Close)
	return &GroupObserver{reader: reader}
}

// Describe returns group's state and members (state Dead and no members
// for a group that does not exist).
func (o *GroupObserver) Describe(group string) (GroupSnapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	d, err := o.reader.DescribeGroup(ctx, group)
	if err != nil {
		return GroupSnapshot{}, err
	}
	snap := GroupSnapshot{State: d.State}
	for _, m := range d.Members {
		snap.Members = append(snap.Members, GroupMember{ID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost, Partitions: m.Partitions})
	}
	return snap, nil
}

// LoopbackPortOwner returns which of pids has an open TCP socket whose
// local port is port (Linux only: it reads /proc). It tells which child
// process a group member is, from the member's ClientHost. ok is false when
// none of the (living) processes has it.
func LoopbackPortOwner(pids []int, port int) (pid int, ok bool) {
	inodes := map[string]bool{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			i := strings.LastIndexByte(fields[1], ':')
			if i < 0 {
				continue
			}
			if p, err := strconv.ParseInt(fields[1][i+1:], 16, 32); err == nil && int(p) == port {
				inodes[fields[9]] = true
			}
		}
		_ = f.Close()
	}
	if len(inodes) == 0 {
		return 0, false
	}
	for _, pid := range pids {
		fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
				return pid, true
			}
		}
	}
	return 0, false
}

// RawMemberConfig configures a RawMember (see kafkatest.RawMemberConfig).
type RawMemberConfig = kafkatest.RawMemberConfig

// RawMember is a classic consumer-group member that a test drives one
// request at a time (JoinGroup, SyncGroup, Heartbeat): see
// kafkatest.RawMember.
type RawMember = kafkatest.RawMember

// NewRawMember returns a member that has not joined yet; its connections
// are closed when tb ends (kafkatest.NewRawMember).
func NewRawMember(tb testing.TB, cfg RawMemberConfig) *RawMember {
	tb.Helper()
	return kafkatest.NewRawMember(tb, cfg)
}
