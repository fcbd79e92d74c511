package projections

import (
	"context"
	"fmt"
	"sort"

	"github.com/eventpipe/eventpipe/eventstore"
)

// ByAggregate groups the events of a delivered batch whose aggregate
// type wants accepts, by aggregate, in order of first appearance; it
// returns how many it left out. Every Sink starts a batch with it.
func ByAggregate(events []eventstore.Envelope, wants map[string]bool) (refs []eventstore.Ref, byAgg map[eventstore.Ref][]eventstore.Envelope, unwanted int) {
	byAgg = map[eventstore.Ref][]eventstore.Envelope{}
	for _, e := range events {
		if !wants[e.AggregateType] {
			unwanted++
			continue
		}
		ref := e.Aggregate()
		if byAgg[ref] == nil {
			refs = append(refs, ref)
		}
		byAgg[ref] = append(byAgg[ref], e)
	}
	return refs, byAgg, unwanted
}

// Pending is what one aggregate's delivered events come to at a
// position: the events to apply, in sequence order with no gap, and how
// many of them were read from the store (gap repair) and how many
// delivered ones were skipped (at or below the position: duplicates).
type Pending struct {
	Apply             []eventstore.Envelope
	Repaired, Skipped int
}

// Sequence turns the delivered events of aggregate ref (any order,
// duplicates allowed) into what to apply after position pos: it skips
// those at or below pos, and where one is more than one ahead, reads the
// missing sequences from store first. name is for errors. Every Sink
// applies a batch through it.
func Sequence(ctx context.Context, store eventstore.Store, name string, ref eventstore.Ref, pos int64, delivered []eventstore.Envelope) (Pending, error) {
	sort.SliceStable(delivered, func(i, j int) bool { return delivered[i].Sequence < delivered[j].Sequence })
	var p Pending
	for _, e := range delivered {
		switch {
		case e.Sequence <= pos:
			p.Skipped++
			continue
		case e.Sequence > pos+1:
			missing, err := store.Load(ctx, ref, pos)
			if err != nil {
				return Pending{}, fmt.Errorf("projections: %s: repair %s after %d: %w", name, ref, pos, err)
			}
			for _, m := range missing {
				if m.Sequence >= e.Sequence {
					break
				}
				p.Apply = append(p.Apply, m)
				p.Repaired++
				pos = m.Sequence
			}
			if pos != e.Sequence-1 {
				return Pending{}, fmt.Errorf("projections: %s: %s: the store has no events %d..%d", name, ref, pos+1, e.Sequence-1)
			}
		}
		p.Apply = append(p.Apply, e)
		pos = e.Sequence
	}
	return p, nil
}
