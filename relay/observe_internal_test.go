package relay

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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

// TestClaimsMoveEachLeaseOnceAndOvershootNobody checks the pass's moves
// as every worker computes them from one listing, over random loads: no
// lease is claimed twice, no worker gives more than it holds above the
// share, no claimant ends above it, and when the workers below the share
// lack at least what the pool holds, every free lease and every lease
// above the share moves, so one pass evens the loads out.
func TestClaimsMoveEachLeaseOnceAndOvershootNobody(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		workers := 1 + rng.IntN(9)
		shards := rng.IntN(400)
		var readable []string
		byID := map[string]Lease{}
		var free []Lease
		loads := map[string]int{}
		for w := range workers {
			loads[fmt.Sprintf("w%d", w)] = 0
		}
		for i := range shards {
			id := fmt.Sprintf("s%04d", i)
			readable = append(readable, id)
			l := Lease{ShardID: id}
			// A skewed spread: some workers hold many, some none.
			if w := rng.IntN(workers + 2); w < workers && rng.IntN(w+1) == 0 {
				l.Owner = fmt.Sprintf("w%d", w)
				loads[l.Owner]++
			} else {
				free = append(free, l)
			}
			byID[id] = l
		}
		target := (shards + workers - 1) / workers
		moved := map[string]string{}
		after := maps.Clone(loads)
		lack, pool := 0, len(free)
		for w, n := range loads {
			lack += max(target-n, 0)
			pool += max(n-target, 0)
			cf, cs, _ := claims(w, readable, byID, loads, free, target, nil)
			for _, l := range slices.Concat(cf, cs) {
				if other, ok := moved[l.ShardID]; ok {
					t.Fatalf("trial %d: %s claimed by %s and %s", trial, l.ShardID, other, w)
				}
				moved[l.ShardID] = w
				after[w]++
				if l.Owner != "" {
					after[l.Owner]--
				}
			}
		}
		for w, n := range after {
			if loads[w] > target && n < target {
				t.Fatalf("trial %d: %s went from %d to %d, below the share %d", trial, w, loads[w], n, target)
			}
			if loads[w] <= target && n > target {
				t.Fatalf("trial %d: %s went from %d to %d, above the share %d", trial, w, loads[w], n, target)
			}
		}
		if lack >= pool && len(moved) != pool {
			t.Fatalf("trial %d: %d of %d leases moved though the workers below the share lack %d", trial, len(moved), pool, lack)
		}
	}
}

// TestClaimsLeaveNothingToAStalledWorker: a worker that stopped renewing
// (one of its leases expired) still counts as live while others are not
// expired, and holds fewer than its share; the free leases must go to
// the live workers' claims or to the leftover every worker takes a part
// of, never to the stalled worker's claim, where they would wait.
func TestClaimsLeaveNothingToAStalledWorker(t *testing.T) {
	var readable []string
	byID := map[string]Lease{}
	var free []Lease
	loads := map[string]int{"dead": 0, "w1": 0, "w2": 0, "w3": 0}
	for i := range 40 {
		id := fmt.Sprintf("s%02d", i)
		readable = append(readable, id)
		l := Lease{ShardID: id}
		switch {
		case i < 30:
			l.Owner = []string{"w1", "w2", "w3"}[i%3]
			loads[l.Owner]++
		case i < 35:
			l.Owner = "dead" // not expired yet
			loads["dead"]++
		default:
			l.Owner = "dead" // expired: free to take
			free = append(free, l)
		}
		byID[id] = l
	}
	target := (len(readable) + len(loads) - 1) / len(loads) // 10: every live worker is at it
	stalled := map[string]bool{"dead": true}
	taken := map[string]bool{}
	for _, w := range []string{"w1", "w2", "w3"} {
		cf, cs, leftover := claims(w, readable, byID, loads, free, target, stalled)
		if len(cs) > 0 {
			t.Errorf("%s steals %d leases though nobody is above the share", w, len(cs))
		}
		for _, l := range slices.Concat(cf, leftover) {
			taken[l.ShardID] = true
		}
	}
	if len(taken) != len(free) {
		t.Fatalf("%d of the stalled worker's %d expired leases are claimed or left over for the live workers", len(taken), len(free))
	}
	if _, _, leftover := claims("w1", readable, byID, loads, free, target, nil); len(leftover) != 0 {
		t.Fatalf("without knowing it stalled, the dead worker claims its expired leases for itself: %d left over, want 0 (the case this guards)", len(leftover))
	}
}
