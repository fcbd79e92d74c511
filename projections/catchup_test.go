package projections_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// memorySink is a Sink in memory: the events it applied and its catch-up
// state, recorded with each batch.
type memorySink struct {
	types   []string
	mu      sync.Mutex
	applied []eventstore.Envelope
	state   projections.CatchUpState
}

func (s *memorySink) Name() string             { return "memory" }
func (s *memorySink) AggregateTypes() []string { return []string{"thing"} }
func (s *memorySink) EventTypes() []string     { return s.types }
func (s *memorySink) HasPositions(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.applied) > 0, nil
}

func (s *memorySink) Apply(ctx context.Context, events []eventstore.Envelope) (projections.Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = append(s.applied, events...)
	return projections.Outcome{Applied: len(events)}, nil
}

func (s *memorySink) CatchUpState(ctx context.Context) (projections.CatchUpState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, nil
}

func (s *memorySink) ApplyCatchUp(ctx context.Context, events []eventstore.Envelope, st projections.CatchUpState) (projections.Outcome, error) {
	out, err := s.Apply(ctx, events)
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
	return out, err
}

// TestCatchUpRecordsNoCursorPastAFailedPage pages two event types: the
// second page of type a fails once. The catch-up must fail without
// recording a cursor past a's unread events (a failed page is not the end
// of a's history), so that the resumed catch-up applies every event.
func TestCatchUpRecordsNoCursorPastAFailedPage(t *testing.T) {
	ev := func(typ string, id int) eventstore.Envelope {
		return eventstore.Envelope{EventID: fmt.Sprintf("%026d", id), EventType: typ, AggregateType: "thing",
			AggregateID: fmt.Sprint(typ, id), Sequence: 1}
	}
	pages := map[string][][]eventstore.Envelope{
		"a": {{ev("a", 1), ev("a", 3)}, {ev("a", 4), ev("a", 7)}},
		"b": {{ev("b", 2), ev("b", 5), ev("b", 6), ev("b", 8)}},
	}
	failed := false
	history := func(ctx context.Context, eventType, after, cursor string) ([]eventstore.Envelope, string, error) {
		i := 0
		if cursor != "" {
			fmt.Sscan(cursor, &i)
		}
		if eventType == "a" && i == 1 && !failed {
			failed = true
			return nil, "", errors.New("the store is unavailable")
		}
		var page []eventstore.Envelope
		for _, e := range pages[eventType][i] {
			if e.EventID > after {
				page = append(page, e)
			}
		}
		next := ""
		if i+1 < len(pages[eventType]) {
			next = fmt.Sprint(i + 1)
		}
		return page, next, nil
	}
	s := &memorySink{types: []string{"a", "b"}}
	if _, err := projections.ResumeCatchUp(context.Background(), s, history, nil); err == nil {
		t.Fatal("the catch-up succeeded though a page failed")
	}
	if st, _ := s.CatchUpState(context.Background()); st.After > ev("a", 3).EventID {
		t.Errorf("after the failed page the state claims every event up to %s; a's events from %s on were never read", st.After, ev("a", 4).EventID)
	}
	st, err := projections.ResumeCatchUp(context.Background(), s, history, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range s.applied {
		got[e.EventID] = true
	}
	for typ, ps := range pages {
		for _, p := range ps {
			for _, e := range p {
				if !got[e.EventID] {
					t.Errorf("event %s of type %s was never applied (state %+v)", e.EventID, typ, st)
				}
			}
		}
	}
}

// TestARunnerCatchesUpOnlyTheTypesItsReadModelGained runs a Runner whose
// read model's finished catch-up covered type a and which now reads b
// too: it records a catch-up of b that skips a, reads only b's history
// (a's was applied already), finishes it while the live consumer runs,
// and records a and b as covered.
func TestARunnerCatchesUpOnlyTheTypesItsReadModelGained(t *testing.T) {
	ev := func(typ string, id int) eventstore.Envelope {
		return eventstore.Envelope{EventID: fmt.Sprintf("%026d", id), EventType: typ, AggregateType: "thing",
			AggregateID: fmt.Sprint(typ, id), Sequence: 1}
	}
	stored := map[string][]eventstore.Envelope{"a": {ev("a", 1), ev("a", 3)}, "b": {ev("b", 2), ev("b", 4), ev("b", 5)}}
	var mu sync.Mutex
	read := map[string]int{}
	history := func(ctx context.Context, eventType, after, cursor string) ([]eventstore.Envelope, string, error) {
		mu.Lock()
		read[eventType]++
		mu.Unlock()
		var page []eventstore.Envelope
		for _, e := range stored[eventType] {
			if e.EventID > after {
				page = append(page, e)
			}
		}
		return page, "", nil
	}
	done := time.Now().Add(-time.Hour).UTC()
	s := &memorySink{types: []string{"a", "b"}, state: projections.CatchUpState{Started: done, Done: done, Events: 2, After: ev("a", 3).EventID, Types: []string{"a"}}}
	pubsub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	r, err := projections.NewRunner(projections.RunnerConfig{Applier: s, Publisher: pubsub, Start: bus.StartHistory, History: history,
		NewSubscriber: func(string) (message.Subscriber, error) { return pubsub, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	integration.Await(t, "the catch-up of b to finish", func() error {
		if st, _ := s.CatchUpState(ctx); st.Done.IsZero() || !st.Started.After(done) {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	st, _ := s.CatchUpState(context.Background())
	if !slices.Equal(st.Types, []string{"a", "b"}) || !slices.Equal(st.Skip, []string{"a"}) || st.Events != 3 {
		t.Errorf("state %+v, want types [a b], skip [a], 3 events", st)
	}
	if read["a"] != 0 || read["b"] == 0 {
		t.Errorf("history pages read per type: %v, want b's only", read)
	}
	var applied []string
	for _, e := range s.applied {
		applied = append(applied, e.EventID)
	}
	if want := []string{ev("b", 2).EventID, ev("b", 4).EventID, ev("b", 5).EventID}; !slices.Equal(applied, want) {
		t.Errorf("applied %v, want b's events %v", applied, want)
	}
}
