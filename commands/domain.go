package commands

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
)

// Domain describes the write model of one aggregate type without any I/O:
// what a catalogue needs to know of it (its event and command types) and
// how to build its command handlers on a store. Domain packages export one
// (for example todo.Domain()); the eventpipe catalogue registers them.
type Domain struct {
	// AggregateType is the type of the domain's aggregates. Required.
	AggregateType string
	// EventTypes are the event types its aggregates record. Required.
	EventTypes eventstore.EventTypes
	// CommandTypes are the commands its handlers take. Required.
	CommandTypes []string
	// Events are the typed definitions of its event types (FacetDomain
	// takes them from the processor's rules, eventstore.NewProcessor),
	// sorted by name: what the schema registry reads. An event type of
	// EventTypes without one has no declared payload shape.
	Events []eventstore.EventDefinition
	// Commands are the typed definitions of its command types
	// (FacetDomain takes them from its deciders, OnCommand), sorted by
	// name.
	Commands []CommandDefinition
	// NewHandlers builds one handler per command type on store; new
	// events get their current schema version from upcasters (nil: 1).
	// Required.
	NewHandlers func(store eventstore.Store, upcasters *eventstore.Upcasters) ([]Handler, error)
	// NewSnapshot builds, on store, the function that snapshots one
	// aggregate of this type (the snapshot consumer calls it every N
	// events, off the write path). Optional: nil means the domain's
	// aggregates are never snapshotted. FacetDomain sets it, unless the
	// processor has HistoryRules (their Load never reads a snapshot); the
	// snapshot of a processor with FoldRules holds their folds too.
	NewSnapshot func(store eventstore.Store, upcasters *eventstore.Upcasters) (SnapshotFunc, error)
	// NewRecalculate builds, on store, the function that recalculates one
	// aggregate's STATE item from its log through the domain's rules
	// (`eventpipe recalculate`). Optional: nil means the domain keeps no
	// STATE to recalculate. FacetDomain sets it.
	NewRecalculate func(store eventstore.Store, opts RecalculateOptions) (RecalculateFunc, error)
	// Personal declares the personal data of its event types, by event
	// type: which fields and whose (package privacy, docs/privacy.md).
	// Optional. Validate checks each declaration; the schema registry
	// checks that its pointers reach string fields of the payload
	// (schemas.CheckPersonal, at registration in a catalogue).
	Personal map[string]privacy.Personal
	// PersonalCommands declares the personal data of its command types'
	// payloads, by command type: a sender seals it before the command
	// travels on the bus, the dispatcher opens it
	// (eventstore.CommandSealer). Optional; Validate checks each one.
	PersonalCommands map[string]privacy.Personal
}

// SnapshotFunc stores the current state of aggregate id (its latest
// snapshot plus the events after it, through the rules) as its new
// snapshot and returns the sequence the snapshot was taken at. A snapshot
// is a cache: calling it again, concurrently or after a crash, is safe,
// and a snapshot never moves backwards (see eventstore.Store.PutSnapshot).
// The error of a stored event the rules now reject is the rules'
// *eventstore.RuleRejection; the store's errors are wrapped.
type SnapshotFunc func(ctx context.Context, id string) (seq int64, err error)

// Validate reports the first unusable field.
func (d Domain) Validate() error {
	if err := eventstore.ValidateName("aggregate_type", d.AggregateType); err != nil {
		return fmt.Errorf("commands: Domain.AggregateType: %w", err)
	}
	bad := func(field, reason string) error {
		return fmt.Errorf("commands: domain %s: %w", d.AggregateType, &eventstore.ValidationError{Field: field, Reason: reason})
	}
	switch {
	case len(d.EventTypes) == 0:
		return bad("EventTypes", "is empty")
	case len(d.CommandTypes) == 0:
		return bad("CommandTypes", "is empty")
	case d.NewHandlers == nil:
		return bad("NewHandlers", "is nil")
	}
	for _, t := range d.CommandTypes {
		if err := eventstore.ValidateName("command_type", t); err != nil {
			return fmt.Errorf("commands: domain %s: CommandTypes: %w", d.AggregateType, err)
		}
	}
	for _, e := range d.Events {
		if _, ok := d.EventTypes[e.Name()]; !ok {
			return bad("Events", fmt.Sprintf("%s is not one of EventTypes", e.Name()))
		}
	}
	for _, c := range d.Commands {
		if !slices.Contains(d.CommandTypes, c.Name()) {
			return bad("Commands", fmt.Sprintf("%s is not one of CommandTypes", c.Name()))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(d.Personal)) {
		if _, ok := d.EventTypes[t]; !ok {
			return bad("Personal", fmt.Sprintf("%s is not one of EventTypes", t))
		}
		if err := d.Personal[t].Validate(); err != nil {
			return fmt.Errorf("commands: domain %s: Personal[%s]: %w", d.AggregateType, t, err)
		}
		if d.Personal[t].SubjectIsActor {
			return bad("Personal", fmt.Sprintf("%s has SubjectIsActor, which only a command's declaration may have", t))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(d.PersonalCommands)) {
		if !slices.Contains(d.CommandTypes, t) {
			return bad("PersonalCommands", fmt.Sprintf("%s is not one of CommandTypes", t))
		}
		if err := d.PersonalCommands[t].Validate(); err != nil {
			return fmt.Errorf("commands: domain %s: PersonalCommands[%s]: %w", d.AggregateType, t, err)
		}
	}
	return nil
}

// FacetDomain describes a domain whose commands decide against the STATE
// of a facet with processor p: one Decider per command type (OnCommand;
// a later one of the same type replaces an earlier one). Its Events are
// the definitions of p's rules, its Commands those of the deciders.
//
//	commands.FacetDomain(AggregateType, Processor(),
//		commands.OnCommand(CreateTodoCommand, decideCreate),
//		commands.OnCommand(DeleteTodoCommand, decideDelete))
func FacetDomain[S any](aggregateType string, p eventstore.Processor[S], deciders ...Decider[S]) Domain {
	decide := make(map[string]Decide[S], len(deciders))
	defs := make(map[string]CommandDefinition, len(deciders))
	for _, dc := range deciders {
		decide[dc.def.Name()], defs[dc.def.Name()] = dc.decide, dc.def
	}
	types := slices.Sorted(maps.Keys(decide))
	cmds := make([]CommandDefinition, 0, len(types))
	for _, t := range types {
		cmds = append(cmds, defs[t])
	}
	events := p.Events()
	evs := make([]eventstore.EventDefinition, 0, len(events))
	for _, t := range slices.Sorted(maps.Keys(events)) {
		evs = append(evs, events[t])
	}
	d := Domain{
		AggregateType: aggregateType,
		EventTypes:    p.Types(),
		CommandTypes:  types,
		Events:        evs,
		Commands:      cmds,
		NewHandlers: func(store eventstore.Store, upcasters *eventstore.Upcasters) ([]Handler, error) {
			facet, err := eventstore.NewFacet(eventstore.FacetConfig[S]{Store: store, AggregateType: aggregateType, Processor: p, Upcasters: upcasters})
			if err != nil {
				return nil, err
			}
			return FacetHandlers(facet, decide)
		},
		NewSnapshot: func(store eventstore.Store, upcasters *eventstore.Upcasters) (SnapshotFunc, error) {
			facet, err := eventstore.NewFacet(eventstore.FacetConfig[S]{Store: store, AggregateType: aggregateType, Processor: p, Upcasters: upcasters})
			if err != nil {
				return nil, err
			}
			return FacetSnapshot(facet), nil
		},
	}
	d.NewRecalculate = func(store eventstore.Store, opts RecalculateOptions) (RecalculateFunc, error) {
		return FacetRecalculate(store, aggregateType, p, opts), nil
	}
	if len(p.HistoryRules) > 0 {
		// Load and AppendWithHistory read such a facet's whole log and
		// never a snapshot: taking one would only cost reads. (Fold
		// rules are read from snapshots: those domains keep them.)
		d.NewSnapshot = nil
	}
	return d
}

// FacetSnapshot is the SnapshotFunc of facet: Facet.Snapshot, returning
// the sequence of the state it stored.
func FacetSnapshot[S any](facet *eventstore.Facet[S]) SnapshotFunc {
	return func(ctx context.Context, id string) (int64, error) {
		st, err := facet.Snapshot(ctx, id)
		return st.Seq, err
	}
}

// FacetHandlers returns one facet handler per command type of decide, in
// command type order.
func FacetHandlers[S any](facet *eventstore.Facet[S], decide map[string]Decide[S]) ([]Handler, error) {
	if len(decide) == 0 {
		return nil, errors.New("commands: FacetHandlers: no command types")
	}
	types := make([]string, 0, len(decide))
	for t := range decide {
		types = append(types, t)
	}
	sort.Strings(types)
	hs := make([]Handler, 0, len(types))
	for _, t := range types {
		h, err := NewFacetHandler(FacetHandlerConfig[S]{CommandType: t, Facet: facet, Decide: decide[t]})
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
	return hs, nil
}
