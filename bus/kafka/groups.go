package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// GroupDescription is a consumer group's state and members as its
// coordinator describes them at one moment.
type GroupDescription struct {
	Group string
	// State is the coordinator's name for the group's state: Empty,
	// Stable, PreparingRebalance, CompletingRebalance or Dead (also for a
	// group that does not exist).
	State string
	// Members are sorted by ID.
	Members []GroupMemberDescription
}

// GroupMemberDescription is one member of a described consumer group.
type GroupMemberDescription struct {
	// ID is the member id the coordinator gave the member.
	ID string
	// ClientID is the client id of the member's JoinGroup request.
	ClientID string
	// ClientHost is the address the member joined from, as the broker
	// reports it.
	ClientHost string
	// Partitions is the member's assignment, topic → partitions, for a
	// group of consumers (protocol type "consumer"); coordinators report
	// it only while the group is Stable, so it is nil otherwise.
	Partitions map[string][]int32
}

// DescribeGroup returns group's state and members, as its coordinator
// describes them now (DescribeGroups), with the reader's client. A group
// that does not exist is described as Dead, without members, and no
// error.
func (r *OffsetReader) DescribeGroup(ctx context.Context, group string) (GroupDescription, error) {
	if group == "" {
		return GroupDescription{}, errors.New("kafka: DescribeGroup: empty group name")
	}
	described, err := r.adm.DescribeGroups(ctx, group)
	if err != nil {
		return GroupDescription{}, fmt.Errorf("kafka: describe group %s: %w", group,
			r.cluster.Security.wrapConnErr("describe groups", r.cluster.Brokers, err))
	}
	d, ok := described[group]
	if !ok {
		return GroupDescription{}, fmt.Errorf("kafka: describe group %s: not in the answer", group)
	}
	out := GroupDescription{Group: group, State: d.State}
	if errors.Is(d.Err, kerr.GroupIDNotFound) {
		// DescribeGroups v6+ answers an unknown group with this error;
		// older versions with the state Dead.
		out.State = "Dead"
		return out, nil
	}
	if d.Err != nil {
		return GroupDescription{}, fmt.Errorf("kafka: describe group %s: %w", group, d.Err)
	}
	for _, m := range d.Members {
		gm := GroupMemberDescription{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
		if a, ok := m.Assigned.AsConsumer(); ok && len(a.Topics) > 0 {
			gm.Partitions = make(map[string][]int32, len(a.Topics))
			for _, t := range a.Topics {
				gm.Partitions[t.Topic] = append(gm.Partitions[t.Topic], t.Partitions...)
			}
		}
		out.Members = append(out.Members, gm)
	}
	slices.SortFunc(out.Members, func(a, b GroupMemberDescription) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
