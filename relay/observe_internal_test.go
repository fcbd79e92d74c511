package relay

import (
	"testing"
	"time"
)

// TestObserveDatesAWriteWithinTheListingWindow checks how a worker dates
// a lease's last write for expiry: by the writer's updated_at when it
// falls between the worker's previous listing and this one, clamped to
// that window when the writer's clock disagrees, and to the listing for a
// lease seen for the first time.
func TestObserveDatesAWriteWithinTheListingWindow(t *testing.T) {
	r := &Relay{observed: map[string]observation{}}
	first := time.Now()
	r.observe([]Lease{{ShardID: "a", Owner: "w1", Counter: 1, UpdatedAt: first.Add(-time.Hour)}}, first)
	if got := r.observed["a"].at; !got.Equal(first) {
		t.Fatalf("first sight dated %v, want the listing %v: another host's clock is not trusted alone", got, first)
	}

	second := first.Add(5 * time.Second)
	inside := first.Add(2 * time.Second).Round(0) // as parsed from the item: no monotonic reading
	ahead := second.Add(time.Minute).Round(0)
	behind := first.Add(-time.Minute).Round(0)
	r.observe([]Lease{
		{ShardID: "a", Owner: "w1", Counter: 2, UpdatedAt: inside},
		{ShardID: "b", Owner: "w2", Counter: 1, UpdatedAt: ahead},
	}, second)
	if got := r.observed["a"].at; !got.Equal(inside) {
		t.Errorf("a write inside the window dated %v, want its updated_at %v", got, inside)
	}
	if got := r.observed["b"].at; !got.Equal(second) {
		t.Errorf("a lease first seen dated %v, want the listing %v", got, second)
	}

	third := second.Add(5 * time.Second)
	r.observe([]Lease{
		{ShardID: "a", Owner: "w1", Counter: 2, UpdatedAt: inside}, // unchanged
		{ShardID: "b", Owner: "w2", Counter: 2, UpdatedAt: ahead},
	}, third)
	if got := r.observed["a"].at; !got.Equal(inside) {
		t.Errorf("an unchanged lease re-dated to %v, want %v", got, inside)
	}
	if got := r.observed["b"].at; !got.Equal(third) {
		t.Errorf("a writer's clock running ahead dated its write %v, want the window's end %v (late, never early)", got, third)
	}

	fourth := third.Add(5 * time.Second)
	r.observe([]Lease{{ShardID: "b", Owner: "w3", Counter: 3, UpdatedAt: behind}}, fourth)
	if got := r.observed["b"].at; !got.Equal(third) {
		t.Errorf("a writer's clock running behind dated its write %v, want the window's start %v", got, third)
	}
	if o := r.observed["b"]; o.owner != "w3" || o.counter != 3 {
		t.Errorf("observation %+v, want owner w3 at counter 3", o)
	}
}
