package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// counter is a tiny facet state for the snapshot hook's tests.
type counter struct {
	N int64 `json:"n"`
}

type addData struct {
	By int64 `json:"by"`
}

func counterProcessor() eventstore.Processor[counter] {
	return eventstore.Processor[counter]{
		Initial: func() counter { return counter{} },
		Rules: map[string]eventstore.Rule[counter]{
			"Added": eventstore.On(func(c counter, d addData, _ *eventstore.Outbox) (counter, error) {
				if d.By < 0 {
					return c, eventstore.Reject("negative")
				}
				c.N += d.By
				return c, nil
			}),
		},
	}
}

// logStore is an in-memory eventstore.Store holding a log and a snapshot
// per aggregate: just what Facet.Load and Facet.Snapshot use (the other
// methods are the nil interface's and panic).
type logStore struct {
	eventstore.Store
	mu        sync.Mutex
	events    map[eventstore.Ref][]eventstore.Envelope
	snapshots map[eventstore.Ref]eventstore.Stored
	loadedAt  []int64 // afterSeq of every Load
}

func newLogStore() *logStore {
	return &logStore{events: map[eventstore.Ref][]eventstore.Envelope{}, snapshots: map[eventstore.Ref]eventstore.Stored{}}
}

func (s *logStore) add(ref eventstore.Ref, by ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range by {
		payload, _ := json.Marshal(addData{By: b})
		seq := int64(len(s.events[ref])) + 1
		s.events[ref] = append(s.events[ref], eventstore.Envelope{EventID: fmt.Sprintf("e-%s-%d", ref.ID, seq), AggregateType: ref.Type,
			AggregateID: ref.ID, Sequence: seq, EventType: "Added", SchemaVersion: 1, Payload: payload})
	}
}

func (s *logStore) Load(_ context.Context, ref eventstore.Ref, after int64) ([]eventstore.Envelope, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadedAt = append(s.loadedAt, after)
	log := s.events[ref]
	if len(log) == 0 && after == 0 {
		return nil, eventstore.ErrAggregateNotFound
	}
	return append([]eventstore.Envelope(nil), log[min(int(after), len(log)):]...), nil
}

func (s *logStore) Snapshot(_ context.Context, ref eventstore.Ref) (eventstore.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.snapshots[ref]
	if !ok {
		return eventstore.Stored{}, eventstore.ErrAggregateNotFound
	}
	return st, nil
}

func (s *logStore) PutSnapshot(_ context.Context, ref eventstore.Ref, st eventstore.Stored) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Seq > int64(len(s.events[ref])) {
		return eventstore.ErrAggregateNotFound
	}
	if cur, ok := s.snapshots[ref]; !ok || cur.Seq < st.Seq {
		s.snapshots[ref] = st
	}
	return nil
}

func counterDomain() commands.Domain {
	return commands.FacetDomain("counter", counterProcessor(),
		commands.OnCommand(commands.DefineCommand[struct{}]("Add"), func(eventstore.State[counter], commands.Command, struct{}) ([]eventstore.NewEvent, error) {
			return nil, nil
		}),
	)
}

func TestFacetDomainSnapshotStoresTheStateAndStartsFromTheLastSnapshot(t *testing.T) {
	ctx := context.Background()
	store := newLogStore()
	ref := eventstore.Ref{Type: "counter", ID: "c1"}
	store.add(ref, 1, 2, 3, 4, 5)
	d := counterDomain()
	if d.NewSnapshot == nil {
		t.Fatal("FacetDomain left NewSnapshot nil")
	}
	snapshot, err := d.NewSnapshot(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := snapshot(ctx, "c1")
	if err != nil || seq != 5 {
		t.Fatalf("snapshot = %d, %v; want 5", seq, err)
	}
	if got := string(store.snapshots[ref].Data); got != `{"n":15}` || store.snapshots[ref].Seq != 5 {
		t.Fatalf("stored snapshot %s at %d, want {\"n\":15} at 5", got, store.snapshots[ref].Seq)
	}

	store.add(ref, 10, 20)
	store.loadedAt = nil
	if seq, err = snapshot(ctx, "c1"); err != nil || seq != 7 {
		t.Fatalf("second snapshot = %d, %v; want 7", seq, err)
	}
	if got := string(store.snapshots[ref].Data); got != `{"n":45}` {
		t.Errorf("stored snapshot %s, want {\"n\":45}", got)
	}
	if len(store.loadedAt) != 1 || store.loadedAt[0] != 5 {
		t.Errorf("loads after %v, want one after the snapshot at 5", store.loadedAt)
	}
}

func TestFacetDomainSnapshotReturnsTheRulesRejectionOfAStoredEvent(t *testing.T) {
	store := newLogStore()
	ref := eventstore.Ref{Type: "counter", ID: "bad"}
	store.add(ref, 1, -1) // appended without the rules
	snapshot, err := counterDomain().NewSnapshot(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = snapshot(context.Background(), "bad")
	var rej *eventstore.RuleRejection
	if !errors.As(err, &rej) || rej.Sequence != 2 {
		t.Fatalf("err = %v, want the *RuleRejection of sequence 2", err)
	}
	if _, ok := store.snapshots[ref]; ok {
		t.Error("a snapshot was stored")
	}
}

func TestFacetDomainSnapshotOfAnUnknownAggregateIsNotFound(t *testing.T) {
	snapshot, err := counterDomain().NewSnapshot(newLogStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot(context.Background(), "nobody"); !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Fatalf("err = %v, want ErrAggregateNotFound", err)
	}
}

func TestDomainWithoutSnapshotIsValid(t *testing.T) {
	d := counterDomain()
	d.NewSnapshot = nil
	if err := d.Validate(); err != nil {
		t.Fatalf("a domain without NewSnapshot: %v", err)
	}
}
