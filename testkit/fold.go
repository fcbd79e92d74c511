package testkit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/elastic"
)

// FoldFixture is a given/then fixture for a search model (an
// elastic.Projection): it folds events into one document per aggregate
// through the model's own Apply, in sequence order, as the Applier does
// before it writes the document to Elasticsearch. Events of aggregate
// types the model does not read are skipped, as the Applier skips them.
//
//	f := testkit.NewFoldFixture(t, searchmodels.TodoSearch{})
//	f.Given("t1", todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "buy milk"}})).
//		ThenDocument("t1", searchmodels.TodoDoc{ID: "t1", Title: "buy milk", Sequence: 1, ...})
//
// Documents are keyed by aggregate id, as the index keys them.
type FoldFixture struct {
	t       testing.TB
	p       elastic.Projection
	wants   map[string]bool
	docs    map[string]json.RawMessage
	version map[eventstore.Ref]int64
	stamped int
	skipped int
	err     error
	failed  string // the event err came from
}

// NewFoldFixture returns the fixture of projection p, with no document.
func NewFoldFixture(t testing.TB, p elastic.Projection) *FoldFixture {
	t.Helper()
	if p == nil || len(p.AggregateTypes()) == 0 {
		t.Fatal("testkit: NewFoldFixture: the projection reads no aggregate type")
	}
	wants := map[string]bool{}
	for _, a := range p.AggregateTypes() {
		wants[a] = true
	}
	return &FoldFixture{t: t, p: p, wants: wants, docs: map[string]json.RawMessage{}, version: map[eventstore.Ref]int64{}}
}

// Given folds events into the document of aggregate id of the model's
// first aggregate type (GivenOn names another), each the aggregate's
// next event: its sequence follows the last one folded, its id is new,
// and its time (OccurredAt when zero) is Epoch plus one second per event
// the fixture stamped before.
func (f *FoldFixture) Given(id string, events ...eventstore.NewEvent) *FoldFixture {
	f.t.Helper()
	return f.GivenOn(eventstore.Ref{Type: f.p.AggregateTypes()[0], ID: id}, events...)
}

// GivenOn is Given for aggregate ref.
func (f *FoldFixture) GivenOn(ref eventstore.Ref, events ...eventstore.NewEvent) *FoldFixture {
	f.t.Helper()
	envs := make([]eventstore.Envelope, 0, len(events))
	seq := f.version[ref]
	for _, ne := range events {
		seq++
		at := ne.OccurredAt
		if at.IsZero() {
			at = Epoch().Add(time.Duration(f.stamped) * time.Second)
		}
		f.stamped++
		raw := ne.Payload
		if raw == nil {
			raw = json.RawMessage(`{}`)
		}
		version := ne.SchemaVersion
		if version == 0 {
			version = 1
		}
		envs = append(envs, eventstore.Envelope{EventID: eventstore.NewEventID(at), AggregateType: ref.Type, AggregateID: ref.ID,
			Sequence: seq, EventType: ne.Type, SchemaVersion: version, OccurredAt: at.UTC(), Payload: raw, Metadata: ne.Metadata})
	}
	return f.GivenEnvelopes(envs...)
}

// GivenEnvelopes folds stored events as they are delivered (for instance
// a DomainFixture's Log): an event at or below its document's sequence
// is a duplicate and skipped, and one that leaves a gap fails the test
// (the Applier would read the missing events from the store first).
// Once Apply fails, later events are not folded: ThenFails checks the
// failure, and every other check reports it.
func (f *FoldFixture) GivenEnvelopes(events ...eventstore.Envelope) *FoldFixture {
	f.t.Helper()
	for _, e := range events {
		if f.err != nil {
			return f
		}
		ref := e.Aggregate()
		if !f.wants[e.AggregateType] {
			f.skipped++
			continue
		}
		switch v := f.version[ref]; {
		case e.Sequence <= v:
			f.skipped++
			continue
		case e.Sequence > v+1:
			f.t.Fatalf("testkit: %s leaves a gap: the document of %s is at sequence %d", e, ref, v)
		}
		doc, err := f.p.Apply(f.docs[ref.ID], e)
		if err != nil {
			f.err, f.failed = err, e.String()
			return f
		}
		if !json.Valid(doc) {
			f.t.Fatalf("testkit: %s: %s returned a document that is not JSON: %q", e, f.p.Name(), doc)
		}
		f.docs[ref.ID], f.version[ref] = doc, e.Sequence
	}
	return f
}

// Document returns the document of aggregate id (nil when there is
// none).
func (f *FoldFixture) Document(id string) json.RawMessage { return f.docs[id] }

// Skipped is how many events were skipped: of aggregate types the model
// does not read, or duplicates.
func (f *FoldFixture) Skipped() int { return f.skipped }

// folded checks that no Apply failed.
func (f *FoldFixture) folded() bool {
	f.t.Helper()
	if f.err != nil {
		f.t.Errorf("search model %s: applying %s failed: %v", f.p.Name(), f.failed, f.err)
		return false
	}
	return true
}

// ThenDocument checks the document of aggregate id against want (JSON
// text, or a value to encode, such as the model's document type), as
// JSON.
func (f *FoldFixture) ThenDocument(id string, want any) *FoldFixture {
	f.t.Helper()
	if !f.folded() {
		return f
	}
	doc, ok := f.docs[id]
	if !ok {
		f.t.Errorf("search model %s: no document %s (documents: %s); want:\n%s", f.p.Name(), id, listOr(slices.Sorted(maps.Keys(f.docs)), "none"), pretty(want))
		return f
	}
	if w, g := pretty(want), pretty(doc); w != g {
		f.t.Errorf("search model %s: %s", f.p.Name(), mismatch("document "+id, w, g))
	}
	return f
}

// ThenDocuments checks every document against want, by aggregate id:
// the same ids, each document equal as JSON.
func (f *FoldFixture) ThenDocuments(want map[string]any) *FoldFixture {
	f.t.Helper()
	if !f.folded() {
		return f
	}
	render := func(docs map[string]string) string {
		var b strings.Builder
		for _, id := range slices.Sorted(maps.Keys(docs)) {
			fmt.Fprintf(&b, "document %s\n%s\n", id, docs[id])
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	w, g := map[string]string{}, map[string]string{}
	for id, d := range want {
		w[id] = pretty(d)
	}
	for id, d := range f.docs {
		g[id] = pretty(d)
	}
	if rw, rg := render(w), render(g); rw != rg {
		f.t.Errorf("search model %s: %s", f.p.Name(), mismatch("documents", rw, rg))
	}
	return f
}

// ThenNoDocument checks that aggregate id has no document.
func (f *FoldFixture) ThenNoDocument(id string) *FoldFixture {
	f.t.Helper()
	if doc, ok := f.docs[id]; f.folded() && ok {
		f.t.Errorf("search model %s: want no document %s, got:\n%s", f.p.Name(), id, pretty(doc))
	}
	return f
}

// ThenFails checks that Apply refused an event with an error whose
// message contains msg; permanent says whether the error must be
// permanent (eventstore.IsPermanent: the consumer parks or poisons the
// event, as the Projection contract wants for an event that can never
// apply) or transient (the consumer retries it).
func (f *FoldFixture) ThenFails(msg string, permanent bool) *FoldFixture {
	f.t.Helper()
	switch {
	case f.err == nil:
		f.t.Errorf("search model %s: want an event refused with %q, every event was applied", f.p.Name(), msg)
	case !strings.Contains(f.err.Error(), msg):
		f.t.Errorf("search model %s: applying %s: want an error containing %q, got: %v", f.p.Name(), f.failed, msg, f.err)
	case eventstore.IsPermanent(f.err) != permanent:
		f.t.Errorf("search model %s: applying %s: want an error that is permanent=%v (eventstore.IsPermanent), got permanent=%v: %v",
			f.p.Name(), f.failed, permanent, !permanent, f.err)
	}
	return f
}
