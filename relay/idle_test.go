package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// read is one GetRecords call as timedStreams saw it.
type read struct {
	start, end time.Time
	records    int
}

// timedStreams is the real stream, recording every successful
// GetRecords call.
type timedStreams struct {
	relay.StreamsAPI
	mu    sync.Mutex
	reads []read
}

func (s *timedStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	start := time.Now()
	out, err := s.StreamsAPI.GetRecords(ctx, in, opts...)
	if err == nil {
		s.mu.Lock()
		s.reads = append(s.reads, read{start: start, end: time.Now(), records: len(out.Records)})
		s.mu.Unlock()
	}
	return out, err
}

func (s *timedStreams) snapshot() []read {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]read(nil), s.reads...)
}

// TestIdleBackOffGrowsToMaxIdlePollAndResetsOnRecords runs a relay on a
// caught-up shard with IdlePoll 50ms and MaxIdlePoll 800ms: the pauses
// between empty reads double from IdlePoll and stop growing at
// MaxIdlePoll; a read that returns records is followed by the next read
// at once, and the back-off starts again from IdlePoll. Pauses are checked
// from below exactly (a timer never fires early) and from above loosely.
func TestIdleBackOffGrowsToMaxIdlePollAndResetsOnRecords(t *testing.T) {
	const idle, maxIdle, slack = 50 * time.Millisecond, 800 * time.Millisecond, 5 * time.Millisecond
	e := newEnv(t)
	e.appendTicks(t, eventstore.Ref{Type: "tick", ID: "a"}, 0, 1)
	cfg := e.relayConfig(t, "w1")
	streams := &timedStreams{StreamsAPI: cfg.Streams}
	cfg.Streams, cfg.IdlePoll, cfg.MaxIdlePoll = streams, idle, maxIdle
	rr := startRelay(t, cfg)
	want := map[string]int64{"a": 1}
	awaitEvents(t, e, rr, e.topics.Events("tick"), want)
	// Wait for the ramp (50+100+200+400+800 ms) and two capped pauses:
	// seven empty reads after the first read with records. The pauses are
	// the relay's own timers; waiting for reads rather than sleeping keeps
	// the test right when DynamoDB Local answers slowly under load.
	busyAt := func(reads []read) []int {
		var out []int
		for i, r := range reads {
			if r.records > 0 {
				out = append(out, i)
			}
		}
		return out
	}
	waitReads := func(what string, done func(reads []read, busy []int) bool) {
		t.Helper()
		integration.Await(t, what, func() error {
			if reads := streams.snapshot(); !done(reads, busyAt(reads)) {
				return fmt.Errorf("%d reads, records at %v", len(reads), busyAt(reads))
			}
			return nil
		})
	}
	waitReads("idle reads after the first event", func(reads []read, busy []int) bool {
		return len(busy) == 1 && len(reads)-busy[0]-1 >= 7
	})
	e.appendTicks(t, eventstore.Ref{Type: "tick", ID: "a"}, 1, 1)
	want["a"] = 2
	awaitEvents(t, e, rr, e.topics.Events("tick"), want)
	waitReads("idle reads after the second event", func(reads []read, busy []int) bool {
		return len(busy) == 2 && len(reads)-busy[1]-1 >= 2
	})
	if err := rr.stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}

	reads := streams.snapshot()
	busy := busyAt(reads)
	if len(busy) != 2 || busy[1] == len(reads)-1 {
		t.Fatalf("reads with records at %v of %d reads, want two (one per append), the last followed by more reads", busy, len(reads))
	}
	pause := func(i int) time.Duration { return reads[i+1].start.Sub(reads[i].end) }
	for _, b := range busy {
		if p := pause(b); p >= maxIdle/2 {
			t.Errorf("read %d returned records, yet the next read came %v later, want at once", b, p)
		}
	}
	// Between the two appends: empty reads with growing, then capped pauses.
	steady := 0
	for j, i := 0, busy[0]+1; i < busy[1]-1; i, j = i+1, j+1 {
		want := min(idle<<j, maxIdle)
		p := pause(i)
		if p < want-slack {
			t.Errorf("empty read %d after records: paused %v, want ≥ %v", j+1, p, want)
		}
		if p > 2*want+time.Second {
			t.Errorf("empty read %d after records: paused %v, want about %v (MaxIdlePoll caps the back-off)", j+1, p, want)
		}
		if want == maxIdle {
			steady++
		}
	}
	if steady < 2 {
		t.Errorf("only %d pauses at MaxIdlePoll between the appends; the relay did not idle long enough to check the cap", steady)
	}
	// After the second append the back-off started again from IdlePoll.
	if i := busy[1] + 1; i < len(reads)-1 {
		if p := pause(i); p < idle-slack || p >= maxIdle/2 {
			t.Errorf("first empty read after new records paused %v, want IdlePoll (%v) again", p, idle)
		}
	}
}

// TestConfigValidateNamesTheBadIntervalField: an invalid idle back-off
// or discovery interval is refused by New with the field's name.
func TestConfigValidateNamesTheBadIntervalField(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name  string
		edit  func(*relay.Config)
		field string
	}{
		{"negative IdlePoll", func(c *relay.Config) { c.IdlePoll = -time.Millisecond }, "IdlePoll"},
		{"MaxIdlePoll below IdlePoll", func(c *relay.Config) { c.IdlePoll, c.MaxIdlePoll = time.Second, 500*time.Millisecond }, "MaxIdlePoll"},
		{"MaxIdlePoll below the default IdlePoll", func(c *relay.Config) { c.MaxIdlePoll = 10 * time.Millisecond }, "MaxIdlePoll"},
		{"negative DiscoveryInterval", func(c *relay.Config) { c.DiscoveryInterval = -time.Second }, "DiscoveryInterval"},
	} {
		cfg := e.relayConfig(t, "w1")
		c.edit(&cfg)
		_, err := relay.New(cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: New = %v, want an *eventstore.ValidationError naming %s", c.name, err, c.field)
		}
	}
	cfg := e.relayConfig(t, "w1")
	cfg.IdlePoll, cfg.MaxIdlePoll = 0, 0
	if _, err := relay.New(cfg); err != nil {
		t.Errorf("defaults: New = %v", err)
	}
}
