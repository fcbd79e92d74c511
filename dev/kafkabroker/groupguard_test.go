package kafkabroker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// The tests below drive kfake's classic group protocol by hand, one
// request at a time, with a client per member; closing a member's client
// closes its connections exactly as a killed process does. Each runs
// against the guarded broker (what the stack runs) and against bare kfake
// (--no-group-guard), where it shows the defect the guard works around:
// if a bare-kfake case starts failing after a kfake upgrade, the defect
// was fixed upstream and the guard can go.

// TestMemberThatDiesWaitingToJoinLeavesTheGroup: a new member enters the
// join barrier while the group waits for an old member, and its process
// dies. The guarded broker removes it at once; bare kfake keeps it and
// counts it as joined, so it becomes part of the next generation (and, if
// handing it the answer fails, never expires). Both ways of joining are
// covered: JoinGroup v4+ (the member id is handed out first) and v3 and
// older (the member waits without knowing its id; sarama speaking Kafka
// 2.1, as eventpipe's clients do).
func TestMemberThatDiesWaitingToJoinLeavesTheGroup(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		for _, v3 := range []bool{false, true} {
			name := guardName(guarded) + "/join_v4+"
			if v3 {
				name = guardName(guarded) + "/join_v3"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				broker := startBroker(t, guarded)
				obs := testenv.NewGroupObserver(t, []string{broker.Addr})
				group := testenv.UniqueName(t, "g")
				ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
				defer cancel()

				brokers := []string{broker.Addr}
				m1 := testenv.NewRawMember(t, testenv.RawMemberConfig{Brokers: brokers, Group: group})
				m1.JoinAndSync(ctx)
				m2 := testenv.NewRawMember(t, testenv.RawMemberConfig{Brokers: brokers, Group: group, Kafka21: v3})
				if !v3 {
					m2.RequestMemberID(ctx)
				}
				joined := make(chan error, 1)
				go func() { _, err := m2.Join(ctx); joined <- err }()
				waitMembers(t, obs, group, 2)
				for _, id := range members(t, obs, group) {
					if id != m1.ID {
						m2.ID = id // a v3 joiner learns its id only from the answer
					}
				}

				m2.Die() // killed while its JoinGroup waits
				<-joined
				gone := eventually(3*time.Second, func() bool { return !slices.Contains(members(t, obs, group), m2.ID) })

				// m1 notices the rebalance and joins it: who is in the
				// new generation?
				resp, err := m1.Join(ctx)
				if err != nil {
					t.Fatalf("m1 rejoin: %v", err)
				}
				var inGeneration []string
				for _, m := range resp.Members {
					inGeneration = append(inGeneration, m.MemberID)
				}
				hasDead := slices.Contains(inGeneration, m2.ID)
				if guarded {
					if !gone || hasDead {
						t.Fatalf("the member that died waiting to join is still in the group (removed within 3 s: %v; in generation %d: %v)", gone, resp.Generation, hasDead)
					}
					return
				}
				if gone || !hasDead {
					t.Fatalf("bare kfake removed the dead joiner (removed: %v, in generation: %v): the upstream defect is fixed, drop the join eviction of the group guard", gone, hasDead)
				}
			})
		}
	}
}

// TestLiveMemberWaitingToJoinIsNotExpired: while the group waits for a
// silent member (alive by its long session), a live member with a short
// session waits in JoinGroup. The guarded broker keeps it alive until the
// barrier completes and answers it; bare kfake expires it while it waits
// and never answers its JoinGroup.
func TestLiveMemberWaitingToJoinIsNotExpired(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		t.Run(guardName(guarded), func(t *testing.T) {
			t.Parallel()
			broker := startBroker(t, guarded)
			obs := testenv.NewGroupObserver(t, []string{broker.Addr})
			group := testenv.UniqueName(t, "g")
			ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
			defer cancel()

			// silent holds the next barrier open for its 12 s session;
			// live has kfake's shortest session, 6 s.
			brokers := []string{broker.Addr}
			silent := testenv.NewRawMember(t, testenv.RawMemberConfig{Brokers: brokers, Group: group, SessionTimeout: 12 * time.Second, RebalanceTimeout: 12 * time.Second})
			live := testenv.NewRawMember(t, testenv.RawMemberConfig{Brokers: brokers, Group: group, SessionTimeout: 6 * time.Second, RebalanceTimeout: 12 * time.Second})
			silent.JoinAndSync(ctx)
			live.RequestMemberID(ctx)
			liveJoined := make(chan error, 1)
			go func() { _, err := live.Join(ctx); liveJoined <- err }()
			waitMembers(t, obs, group, 2)
			if _, err := silent.Join(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-liveJoined; err != nil {
				t.Fatal(err)
			}
			leader, follower := silent, live
			if live.Leader {
				leader, follower = live, silent
			}
			synced := make(chan error, 1)
			go func() { synced <- follower.Sync(ctx) }()
			time.Sleep(100 * time.Millisecond) // the follower waits in SyncGroup first
			if err := leader.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-synced; err != nil {
				t.Fatal(err)
			}

			// A third member starts a rebalance; live learns of it from
			// its heartbeat and rejoins; silent stays silent.
			third := testenv.NewRawMember(t, testenv.RawMemberConfig{Brokers: brokers, Group: group, SessionTimeout: 30 * time.Second, RebalanceTimeout: 12 * time.Second})
			third.RequestMemberID(ctx)
			go func() { _, _ = third.Join(ctx) }()
			waitMembers(t, obs, group, 3)
			if err := live.Heartbeat(ctx); !errors.Is(err, kerr.RebalanceInProgress) {
				t.Fatalf("live heartbeat during the rebalance: %v, want REBALANCE_IN_PROGRESS", err)
			}
			start := time.Now()
			answered := make(chan error, 1)
			go func() { _, err := live.Join(ctx); answered <- err }()

			// The barrier ends when silent's session expires, about
			// 12 s after its SyncGroup answer.
			select {
			case err := <-answered:
				if !guarded {
					t.Fatalf("bare kfake answered the live member's JoinGroup (%v) after %s: the upstream defect is fixed, drop the keep-alive of the group guard", err, time.Since(start))
				}
				if err != nil {
					t.Fatalf("live member's JoinGroup: %v", err)
				}
				if !slices.Contains(members(t, obs, group), live.ID) {
					t.Fatal("the live member is not in the new generation")
				}
			case <-time.After(20 * time.Second):
				if guarded {
					t.Fatalf("the live member's JoinGroup was not answered within 20 s; members now %v", members(t, obs, group))
				}
				if slices.Contains(members(t, obs, group), live.ID) {
					t.Fatal("bare kfake kept the live member but did not answer it")
				}
			}
		})
	}
}

// TestLeaderThatDiesBeforeSyncingDoesNotHoldTheGroup: the leader of a
// new generation dies after its JoinGroup answer, before its SyncGroup,
// while the other member waits in SyncGroup for the assignment. The
// guarded broker removes the dead leader at once and the waiting member
// is told to rejoin within a second or two; bare kfake, like Kafka, holds
// the group for the rebalance timeout (8 s here).
func TestLeaderThatDiesBeforeSyncingDoesNotHoldTheGroup(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		t.Run(guardName(guarded), func(t *testing.T) {
			t.Parallel()
			broker := startBroker(t, guarded)
			obs := testenv.NewGroupObserver(t, []string{broker.Addr})
			group := testenv.UniqueName(t, "g")
			ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
			defer cancel()
			cfg := testenv.RawMemberConfig{Brokers: []string{broker.Addr}, Group: group, SessionTimeout: 10 * time.Second, RebalanceTimeout: 8 * time.Second}
			a, b := testenv.NewRawMember(t, cfg), testenv.NewRawMember(t, cfg)
			a.JoinAndSync(ctx)
			b.RequestMemberID(ctx)
			bJoined := make(chan error, 1)
			go func() { _, err := b.Join(ctx); bJoined <- err }()
			waitMembers(t, obs, group, 2)
			if _, err := a.Join(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-bJoined; err != nil {
				t.Fatal(err)
			}
			leader, follower := a, b
			if b.Leader {
				leader, follower = b, a
			}
			synced := make(chan error, 1)
			go func() { synced <- follower.Sync(ctx) }()
			time.Sleep(200 * time.Millisecond) // the follower waits in SyncGroup
			start := time.Now()
			leader.Die()
			err := <-synced
			took := time.Since(start)
			t.Logf("the follower's SyncGroup returned %v after %s", err, took.Truncate(time.Millisecond))
			if !errors.Is(err, kerr.RebalanceInProgress) {
				t.Fatalf("follower SyncGroup: %v, want REBALANCE_IN_PROGRESS", err)
			}
			// The guard's point: the group does not wait out the
			// rebalance timeout for a dead leader (a lower bound for bare
			// kfake, which a slow machine only makes longer).
			if guarded && took >= cfg.RebalanceTimeout {
				t.Fatalf("the group waited %s for a leader that died before syncing, the whole rebalance timeout (%s)", took.Truncate(time.Millisecond), cfg.RebalanceTimeout)
			}
			if !guarded && took < cfg.RebalanceTimeout*3/4 {
				t.Fatalf("bare kfake gave up on the dead leader after %s, before the rebalance timeout: the upstream behaviour changed", took.Truncate(time.Millisecond))
			}
		})
	}
}

func guardName(guarded bool) string {
	if guarded {
		return "guarded"
	}
	return "bare_kfake"
}

func startBroker(t *testing.T, guarded bool) *testservers.KafkaBrokerProcess {
	cfg := testservers.KafkaBrokerConfig{DataDir: t.TempDir()}
	if !guarded {
		cfg.Args = []string{"--no-group-guard"}
	}
	return testservers.StartKafkaBrokerWithConfig(t, cfg)
}

// members returns the member ids the coordinator describes for group.
func members(t *testing.T, obs *testenv.GroupObserver, group string) []string {
	t.Helper()
	snap, err := obs.Describe(group)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range snap.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

func waitMembers(t *testing.T, obs *testenv.GroupObserver, group string, n int) {
	t.Helper()
	integration.Await(t, fmt.Sprintf("group %s with %d members", group, n), func() error {
		if ids := members(t, obs, group); len(ids) != n {
			return fmt.Errorf("members %v", ids)
		}
		return nil
	})
}

// eventually reports whether cond holds within within: for the checks
// that something happens (or does not) within a bound the broker's
// behaviour sets, not for waiting.
func eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}
