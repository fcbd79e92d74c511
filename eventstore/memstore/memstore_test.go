package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	if _, err := memstore.New(memstore.Config{}); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	for name, tc := range map[string]struct {
		cfg   memstore.Config
		field string
	}{
		"page size above the maximum": {memstore.Config{PageSize: eventstore.MaxPageSize + 1}, "PageSize"},
		"negative page size":          {memstore.Config{PageSize: -1}, "PageSize"},
		"negative retention":          {memstore.Config{CommandRetention: -time.Second}, "CommandRetention"},
	} {
		_, err := memstore.New(tc.cfg)
		if err == nil {
			t.Errorf("%s: New accepted it", name)
		}
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: New = %v, want an *eventstore.ValidationError on %s", name, err, tc.field)
		}
	}
}

// clock is a settable Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newStore(t *testing.T, cfg memstore.Config) *memstore.Store {
	t.Helper()
	s, err := memstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// appendTo appends events of the given types to ref at expected.
func appendTo(t *testing.T, s *memstore.Store, ref eventstore.Ref, expected int64, commandID string, types ...string) eventstore.AppendResult {
	t.Helper()
	ch := eventstore.Change{CommandID: commandID}
	for i, typ := range types {
		ch.Events = append(ch.Events, eventstore.Event(typ, map[string]int{"n": i}))
	}
	req, err := eventstore.Prepare(ref, expected, ch, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(context.Background(), req)
	if err != nil {
		t.Fatalf("append %s at %d: %v", ref, expected, err)
	}
	return res
}

// TestCommandRecordsExpireAfterRetention: within CommandRetention a
// redelivery is a duplicate and a refusal is repeated; after it the
// records are gone and the command is applied again, as after DynamoDB's
// TTL deleted the record.
func TestCommandRecordsExpireAfterRetention(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := newStore(t, memstore.Config{CommandRetention: time.Hour, Now: c.Now})
	ref := eventstore.Ref{Type: "account", ID: "a1"}
	appendTo(t, s, ref, 0, "cmd-1", "Opened")
	if _, err := s.RecordRefusal(ctx, ref, "cmd-2", eventstore.Refusal{Status: "rejected", Version: 1}); err != nil {
		t.Fatal(err)
	}
	c.Add(59 * time.Minute)
	if res, err := s.CommandResult(ctx, ref, "cmd-1"); err != nil || !res.Duplicate {
		t.Fatalf("before expiry: %+v, %v; want the recorded append", res, err)
	}
	var refused *eventstore.RefusedCommandError
	if _, err := s.CommandResult(ctx, ref, "cmd-2"); !errors.As(err, &refused) {
		t.Fatalf("before expiry: %v; want the recorded refusal", err)
	}
	c.Add(time.Minute)
	for _, id := range []string{"cmd-1", "cmd-2"} {
		if _, err := s.CommandResult(ctx, ref, id); !errors.Is(err, eventstore.ErrCommandNotFound) {
			t.Fatalf("%s after expiry: %v; want ErrCommandNotFound", id, err)
		}
	}
	if res := appendTo(t, s, ref, 1, "cmd-1", "Opened"); res.LastSeq != 2 {
		t.Fatalf("an expired command applied again: %+v", res)
	}
	if res, err := s.RecordRefusal(ctx, ref, "cmd-2", eventstore.Refusal{Status: "conflict", Version: 2}); err != nil || res.Duplicate {
		t.Fatalf("a refusal of an expired command: %+v, %v; want it recorded", res, err)
	}
}

// TestChangesReportCommitsInOrder: every committed append, and nothing
// else, gets the next position; its events come as stored (not upcast)
// with its outbound records.
func TestChangesReportCommitsInOrder(t *testing.T) {
	ctx := context.Background()
	ups := (&eventstore.Upcasters{}).MustRegister("Opened", 1, func(p json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"v":2}`), nil
	})
	s := newStore(t, memstore.Config{Schema: eventstore.Schema{Upcasters: ups}})
	a, b := eventstore.Ref{Type: "account", ID: "a"}, eventstore.Ref{Type: "account", ID: "b"}
	if got, err := s.Changes(ctx, 0, 0); err != nil || len(got) != 0 || s.Head() != 0 {
		t.Fatalf("an empty store: %v, %v, head %d", got, err, s.Head())
	}
	old, err := eventstore.Prepare(a, 0, eventstore.Change{Events: []eventstore.NewEvent{{Type: "Opened", SchemaVersion: 1, Payload: json.RawMessage(`{"v":1}`)}}}, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	old.Outbound = []eventstore.Outbound{{Seq: 1, Name: "Welcome", Payload: json.RawMessage(`{}`)}}
	old.State = json.RawMessage(`{}`)
	if _, err := s.Append(ctx, old); err != nil {
		t.Fatal(err)
	}
	appendTo(t, s, b, 0, "", "Opened", "Deposited")
	if _, err := s.Append(ctx, old); err == nil {
		t.Fatal("a stale append succeeded")
	}
	if _, err := s.RecordRefusal(ctx, a, "cmd-x", eventstore.Refusal{Status: "rejected", Version: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSnapshot(ctx, a, eventstore.Stored{Seq: 1, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, eventstore.AppendRequest{Aggregate: a, ExpectedVersion: 1, State: json.RawMessage(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range all {
		line := fmt.Sprintf("%d %s", c.Position, c.Aggregate)
		for _, e := range c.Events {
			line += fmt.Sprintf(" %s v%d %s", e, e.SchemaVersion, e.Payload)
		}
		for _, o := range c.Outbound {
			line += fmt.Sprintf(" outbound %s caused by %t", o.Name, o.EventID == c.Events[0].EventID)
		}
		got = append(got, line)
	}
	want := []string{
		`1 account/a account/a#1 Opened v1 {"v":1} outbound Welcome caused by true`,
		`2 account/b account/b#1 Opened v2 {"n":0} account/b#2 Deposited v1 {"n":1}`,
		`3 account/a`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes:\n%q\nwant\n%q", got, want)
	}
	if s.Head() != 3 {
		t.Fatalf("head %d, want 3", s.Head())
	}
	if page, err := s.Changes(ctx, 1, 1); err != nil || len(page) != 1 || page[0].Position != 2 {
		t.Fatalf("Changes(after 1, limit 1) = %+v, %v", page, err)
	}
	if rest, err := s.Changes(ctx, 3, 10); err != nil || len(rest) != 0 {
		t.Fatalf("Changes after the head = %+v, %v", rest, err)
	}
	if _, err := s.Changes(ctx, 0, -1); err == nil {
		t.Fatal("a negative limit was accepted")
	}
	all[1].Events[0].Payload[0] = 'X'
	if again, _ := s.Changes(ctx, 1, 1); again[0].Events[0].Payload[0] == 'X' {
		t.Fatal("modifying a change modified the feed")
	}
}

// TestWaitWakesAnInProcessRelay runs a relay loop (Changes, then Wait)
// beside concurrent appenders and checks that it sees every commit once,
// in position order, each aggregate's events in sequence order; and that
// Wait gives up when its context ends.
func TestWaitWakesAnInProcessRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	s := newStore(t, memstore.Config{PageSize: 7})
	const writers, each = 4, 25
	seen := make(chan []memstore.Change, 1)
	go func() {
		var got []memstore.Change
		var at memstore.Position
		for len(got) < writers*each {
			page, err := s.Changes(ctx, at, 0)
			if err != nil {
				t.Error(err)
				break
			}
			got = append(got, page...)
			if len(page) > 0 {
				at = page[len(page)-1].Position
				continue
			}
			if _, err := s.Wait(ctx, at); err != nil {
				t.Error(err)
				break
			}
		}
		seen <- got
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := eventstore.Ref{Type: "account", ID: fmt.Sprint("w", w)}
			for v := range int64(each) {
				appendTo(t, s, ref, v, "", "Deposited")
			}
		}()
	}
	wg.Wait()
	got := <-seen
	last := map[eventstore.Ref]int64{}
	for i, c := range got {
		if c.Position != memstore.Position(i+1) || len(c.Events) != 1 {
			t.Fatalf("change %d: position %d with %d events", i, c.Position, len(c.Events))
		}
		if seq := c.Events[0].Sequence; seq != last[c.Aggregate]+1 {
			t.Fatalf("change %d: %s after sequence %d", i, c.Events[0], last[c.Aggregate])
		} else {
			last[c.Aggregate] = seq
		}
	}
	if len(got) != writers*each {
		t.Fatalf("the relay saw %d changes, want %d", len(got), writers*each)
	}
	if head, err := s.Wait(ctx, 0); err != nil || head != writers*each {
		t.Fatalf("Wait behind the head = %d, %v; want at once", head, err)
	}
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	if _, err := s.Wait(short, s.Head()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait at the head with no append: %v; want the context's error", err)
	}
}
