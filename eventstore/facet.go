package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// FacetConfig configures a Facet.
type FacetConfig[S any] struct {
	// Store holds the events and the STATE item. Required.
	Store Store
	// AggregateType is the type of every aggregate of this facet, e.g.
	// "bankaccount". Required.
	AggregateType string
	// Processor gives the initial state and one rule per event type.
	// Required: Initial and at least one rule (in Rules, HistoryRules or
	// FoldRules, only one of them for one event type).
	Processor Processor[S]
	// Upcasters decide the schema version of new events (the current one)
	// and must be the store's own, so that rules see current payloads.
	Upcasters *Upcasters
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// FoldCache is how many aggregates' folds (of FoldRules) the facet
	// keeps in memory between AppendWithHistory calls, the least recently
	// used dropped first: an aggregate held costs no snapshot read, only
	// the events appended since. Default DefaultFoldCache; negative:
	// none, every call reads the snapshot.
	FoldCache int
}

// DefaultFoldCache is FacetConfig.FoldCache's default.
const DefaultFoldCache = 256

func (c *FacetConfig[S]) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FoldCache == 0 {
		c.FoldCache = DefaultFoldCache
	}
}

// Validate reports the first missing or malformed field.
func (c FacetConfig[S]) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("eventstore: FacetConfig: %w", &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Store == nil {
		return bad("Store", "is nil")
	}
	if err := ValidateName("aggregate_type", c.AggregateType); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return bad("AggregateType", "%s", ve.Reason)
		}
		return bad("AggregateType", "%v", err)
	}
	if c.Processor.Initial == nil {
		return bad("Processor.Initial", "is nil")
	}
	if len(c.Processor.Rules) == 0 && len(c.Processor.HistoryRules) == 0 && len(c.Processor.FoldRules) == 0 {
		return bad("Processor.Rules", "is empty, and so are HistoryRules and FoldRules: give at least one rule")
	}
	for t, r := range c.Processor.Rules {
		if err := ValidateName("event_type", t); err != nil {
			return bad("Processor.Rules", "%v", err)
		}
		if r == nil {
			return bad(fmt.Sprintf("Processor.Rules[%q]", t), "is nil")
		}
		if _, ok := c.Processor.HistoryRules[t]; ok {
			return bad(fmt.Sprintf("Processor.Rules[%q]", t), "%q has a rule in both Rules and HistoryRules", t)
		}
	}
	for t, r := range c.Processor.HistoryRules {
		if err := ValidateName("event_type", t); err != nil {
			return bad("Processor.HistoryRules", "%v", err)
		}
		if r == nil {
			return bad(fmt.Sprintf("Processor.HistoryRules[%q]", t), "is nil")
		}
	}
	keys := make(map[string]string, len(c.Processor.FoldRules))
	for t, r := range c.Processor.FoldRules {
		if err := ValidateName("event_type", t); err != nil {
			return bad("Processor.FoldRules", "%v", err)
		}
		if r == nil {
			return bad(fmt.Sprintf("Processor.FoldRules[%q]", t), "is nil")
		}
		if err := r.validate(); err != nil {
			return bad(fmt.Sprintf("Processor.FoldRules[%q]", t), "%v", err)
		}
		_, inRules := c.Processor.Rules[t]
		if _, inHistory := c.Processor.HistoryRules[t]; inRules || inHistory {
			return bad(fmt.Sprintf("Processor.FoldRules[%q]", t), "%q has a rule in FoldRules and in Rules or HistoryRules", t)
		}
		if other, ok := keys[r.foldKey()]; ok {
			return bad("Processor.FoldRules", "%q and %q both use fold key %q", other, t, r.foldKey())
		}
		keys[r.foldKey()] = t
	}
	return nil
}

// Facet keeps the current state of each aggregate of one type in a STATE
// item beside its events. Every append reads or
// is given the state, runs the rules over the new events, and writes the
// events, the new STATE and any OUTBOUND events in one conditional
// transaction, so STATE always equals a replay of the log. S must survive
// a JSON round trip: the state is stored as JSON. Rules that need the
// aggregate's earlier events (HistoryRule) get them from Recalculate,
// AppendWithHistory and Load, which read the whole log; rules that fold
// the past (FoldRule) get it there too, from the latest snapshot plus the
// later events when the facet has no HistoryRule. Append and AppendTo
// read only STATE.
//
// A Facet is safe for concurrent use; concurrent appends to one aggregate
// are serialised by the store's optimistic concurrency (losers get
// *ConcurrencyError and nothing is written).
type Facet[S any] struct {
	cfg    FacetConfig[S]
	schema Schema
	folds  *foldCache
}

// NewFacet validates cfg and returns a Facet.
func NewFacet[S any](cfg FacetConfig[S]) (*Facet[S], error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Facet[S]{cfg: cfg, schema: Schema{Types: cfg.Processor.Types(), Upcasters: cfg.Upcasters}, folds: newFoldCache(cfg.FoldCache)}, nil
}

// State is an aggregate's state after the event with sequence Seq (0: no
// event yet, the initial state).
type State[S any] struct {
	Ref  Ref
	Seq  int64
	Item S
	// IfState is what an append to this state requires of the STATE
	// item besides Seq: set by Get and Append (the revision of the STATE
	// read) and in an append's Result (the revision written), so that an
	// append decided on a STATE that a recalculation has rewritten since
	// fails with *ConcurrencyError (StateRewritten) instead of writing a
	// state derived from the old one back. Nil (Load, Initial, a state
	// built by hand): only Seq is required.
	IfState *StateCondition
}

// Result is what an append did.
type Result[S any] struct {
	// State is the state after the append (for a duplicate command: the
	// current STATE).
	State State[S]
	// Events are the events written (nil for a duplicate).
	Events []Envelope
	// Outbound are the outbound events written with them.
	Outbound []Outbound
	// Duplicate is set when the command id had already been applied and
	// nothing was written; Append holds the original result.
	Duplicate bool
	Append    AppendResult
}

func (f *Facet[S]) ref(id string) Ref { return Ref{Type: f.cfg.AggregateType, ID: id} }

// AggregateType returns the type of the facet's aggregates.
func (f *Facet[S]) AggregateType() string { return f.cfg.AggregateType }

// Initial returns the state of aggregate id before its first event (Seq
// 0, the processor's initial state), to AppendTo when Get reports
// ErrAggregateNotFound.
func (f *Facet[S]) Initial(id string) State[S] {
	return State[S]{Ref: f.ref(id), Item: f.cfg.Processor.Initial()}
}

// Get returns the STATE of aggregate id, or ErrAggregateNotFound.
func (f *Facet[S]) Get(ctx context.Context, id string) (State[S], error) {
	ref := f.ref(id)
	if err := ref.Validate(); err != nil {
		return State[S]{}, fmt.Errorf("get %s: %w", ref, err)
	}
	st, err := f.cfg.Store.State(ctx, ref)
	if err != nil {
		return State[S]{}, fmt.Errorf("get %s: %w", ref, err)
	}
	item, err := f.decode(st.Data)
	if err != nil {
		return State[S]{}, fmt.Errorf("get %s: STATE at %d: %w", ref, st.Seq, err)
	}
	return State[S]{Ref: ref, Seq: st.Seq, Item: item, IfState: &StateCondition{Revision: st.Revision}}, nil
}

// Append reads the STATE of aggregate id (the initial state when there is
// none), applies the rules to ch's events and writes everything in one
// transaction conditional on the STATE's version and revision (a STATE
// rewritten meanwhile by a recalculation is a *ConcurrencyError). A rule's refusal returns
// *RuleRejection and writes nothing, unless ch.CommandID had already been
// applied (then the original result comes back with Duplicate). A
// concurrent append returns *ConcurrencyError. An aggregate whose events
// were appended without its facet has no up-to-date STATE: every Append
// conflicts until Recalculate recalculates it. Append reads no past events:
// history rules see PastLoaded false, and one that needs the past fails
// the append with ErrPastNotLoaded (use Recalculate).
func (f *Facet[S]) Append(ctx context.Context, id string, ch Change) (Result[S], error) {
	ref := f.ref(id)
	if err := ref.Validate(); err != nil {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	}
	cur := State[S]{Ref: ref, Item: f.cfg.Processor.Initial()}
	st, err := f.cfg.Store.State(ctx, ref)
	switch {
	case errors.Is(err, ErrAggregateNotFound):
	case err != nil:
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	default:
		if cur.Item, err = f.decode(st.Data); err != nil {
			return Result[S]{}, fmt.Errorf("append %s: STATE at %d: %w", ref, st.Seq, err)
		}
		cur.Seq, cur.IfState = st.Seq, &StateCondition{Revision: st.Revision}
	}
	return f.appendTo(ctx, cur, ch)
}

// AppendTo is Append against a state the caller already holds (from Get,
// Load or a previous Result), without reading it again. If anyone appended
// since, it returns *ConcurrencyError and writes nothing. cur.Item is not
// modified. cur.Ref must name an aggregate of this facet.
func (f *Facet[S]) AppendTo(ctx context.Context, cur State[S], ch Change) (Result[S], error) {
	if err := f.own(cur.Ref); err != nil {
		return Result[S]{}, err
	}
	return f.appendTo(ctx, cur, ch)
}

// NeedsHistory reports whether the facet's processor has history or fold
// rules, whose appends must go through AppendWithHistory (or
// Recalculate).
func (f *Facet[S]) NeedsHistory() bool {
	return len(f.cfg.Processor.HistoryRules) > 0 || len(f.cfg.Processor.FoldRules) > 0
}

// readsSnapshots reports whether Load and AppendWithHistory may start
// from a snapshot: no rule needs the past as events.
func (f *Facet[S]) readsSnapshots() bool { return len(f.cfg.Processor.HistoryRules) == 0 }

// AppendWithHistory is AppendTo for a facet whose history rules need the
// past. It reads the aggregate's events, which must end at cur.Seq (a
// longer log means someone appended since: *ConcurrencyError), applies
// ch's events to cur.Item with that past and writes conditional on
// cur.Seq; it trusts cur instead of replaying the log. Command handlers
// of such a facet append this way.
//
// With HistoryRules it reads the whole log, as Recalculate does
// (Processor.ApplyWithHistory). With only FoldRules it starts from the
// folds it kept from its previous append to the aggregate (FoldCache),
// else from the latest snapshot holding them (Snapshot), else from
// nothing; reads the events after that, folds them, and applies ch's
// events with the result: the same answer as from the whole log, which
// it reads only when nothing else is there.
func (f *Facet[S]) AppendWithHistory(ctx context.Context, cur State[S], ch Change) (Result[S], error) {
	ref := cur.Ref
	if err := f.own(ref); err != nil {
		return Result[S]{}, err
	}
	if len(ch.Events) == 0 {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, &ValidationError{Field: "events", Reason: "is empty"})
	}
	if f.readsSnapshots() {
		return f.appendFolded(ctx, cur, ch)
	}
	past, err := f.cfg.Store.Load(ctx, ref, 0)
	if err != nil && !errors.Is(err, ErrAggregateNotFound) {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	}
	var actual int64
	if len(past) > 0 {
		actual = past[len(past)-1].Sequence
	}
	if actual != cur.Seq {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, &ConcurrencyError{Aggregate: ref, Expected: cur.Seq, Actual: actual})
	}
	return f.apply(ctx, cur, ch, func(state S, events []Envelope) (S, []Outbound, error) {
		return f.cfg.Processor.ApplyWithHistory(state, past, events)
	})
}

// appendFolded is AppendWithHistory for a facet whose history rules all
// fold: the folds come from the cache or the latest snapshot that holds
// them (else from nothing) plus the events after them, which must end at
// cur.Seq. Folds that still match the log afterwards (its stored events
// only) go back to the cache.
func (f *Facet[S]) appendFolded(ctx context.Context, cur State[S], ch Change) (Result[S], error) {
	ref := cur.Ref
	fs := f.folds.take(ref)
	if fs == nil {
		var err error
		if _, fs, err = f.snapshot(ctx, ref); err != nil {
			return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
		}
	}
	events, err := f.cfg.Store.Load(ctx, ref, fs.seq)
	if err != nil && !errors.Is(err, ErrAggregateNotFound) {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	}
	actual := fs.seq
	if len(events) > 0 {
		actual = events[len(events)-1].Sequence
	}
	if actual != cur.Seq {
		f.folds.put(ref, fs)
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, &ConcurrencyError{Aggregate: ref, Expected: cur.Seq, Actual: actual})
	}
	if err := f.cfg.Processor.foldLog(fs, events); err != nil {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	}
	res, err := f.apply(ctx, cur, ch, func(state S, events []Envelope) (S, []Outbound, error) {
		return f.cfg.Processor.applyFolded(state, fs, events)
	})
	// fs matches the log when it folded nothing new (a refusal before any
	// event was folded), or exactly the events this call wrote.
	if fs.seq == cur.Seq || err == nil && !res.Duplicate && fs.seq == res.State.Seq {
		f.folds.put(ref, fs)
	}
	return res, err
}

// own checks that ref is a valid aggregate of this facet.
func (f *Facet[S]) own(ref Ref) error {
	if ref.Type != f.cfg.AggregateType {
		return fmt.Errorf("append %s: %w", ref, &ValidationError{Field: "aggregate_type", Reason: fmt.Sprintf("is %q, this facet holds %q", ref.Type, f.cfg.AggregateType)})
	}
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("append %s: %w", ref, err)
	}
	return nil
}

func (f *Facet[S]) appendTo(ctx context.Context, cur State[S], ch Change) (Result[S], error) {
	return f.apply(ctx, cur, ch, f.cfg.Processor.Apply)
}

// apply prepares ch on cur, runs the rules (run: the processor's Apply or
// one with the past) and writes.
func (f *Facet[S]) apply(ctx context.Context, cur State[S], ch Change, run func(state S, events []Envelope) (S, []Outbound, error)) (Result[S], error) {
	ref := cur.Ref
	if len(ch.Events) == 0 {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, &ValidationError{Field: "events", Reason: "is empty"})
	}
	req, err := Prepare(ref, cur.Seq, ch, f.schema)
	if err != nil {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	}
	req.IfState = cur.IfState // the STATE decided on, unchanged since
	state, err := f.clone(cur.Item)
	if err != nil {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	}
	state, outbound, err := run(state, req.Events)
	if err != nil {
		var rej *RuleRejection
		if errors.As(err, &rej) && ch.CommandID != "" {
			if res, derr := f.duplicate(ctx, ref, ch.CommandID); derr == nil {
				return res, nil
			}
		}
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	}
	return f.write(ctx, req, state, outbound)
}

// Recalculate reads every event of aggregate id, replays them through the
// rules from the initial state (Processor.Replay: outbound events of past
// events are not published again), applies ch's events if any
// (Processor.ApplyWithHistory: their outbound events are published) and
// writes the STATE, and the new events, in one transaction conditional on
// the version read. With no events stored and none in ch it returns
// ErrAggregateNotFound. A stored event that a rule now rejects fails the
// recalculation with that *RuleRejection; nothing is written.
//
// Because it reads the whole log, Recalculate is how events are appended
// to a facet whose history rules need the past: they see every stored
// event (History.Past), at the cost of reading them all.
func (f *Facet[S]) Recalculate(ctx context.Context, id string, ch Change) (Result[S], error) {
	ref := f.ref(id)
	if err := ref.Validate(); err != nil {
		return Result[S]{}, fmt.Errorf("recalculate %s: %w", ref, err)
	}
	past, err := f.cfg.Store.Load(ctx, ref, 0)
	if err != nil && !(errors.Is(err, ErrAggregateNotFound) && len(ch.Events) > 0) {
		return Result[S]{}, fmt.Errorf("recalculate %s: %w", ref, err)
	}
	state, err := f.cfg.Processor.Replay(past)
	if err != nil {
		return Result[S]{}, fmt.Errorf("recalculate %s: replay: %w", ref, err)
	}
	var version int64
	if len(past) > 0 {
		version = past[len(past)-1].Sequence
	}
	req, err := Prepare(ref, version, ch, f.schema)
	if err != nil {
		return Result[S]{}, fmt.Errorf("recalculate %s: %w", ref, err)
	}
	state, outbound, err := f.cfg.Processor.ApplyWithHistory(state, past, req.Events)
	if err != nil {
		return Result[S]{}, fmt.Errorf("recalculate %s: %w", ref, err)
	}
	res, err := f.write(ctx, req, state, outbound)
	if err != nil {
		return Result[S]{}, fmt.Errorf("recalculate: %w", err)
	}
	return res, nil
}

func (f *Facet[S]) write(ctx context.Context, req AppendRequest, state S, outbound []Outbound) (Result[S], error) {
	ref := req.Aggregate
	data, err := json.Marshal(state)
	if err != nil {
		return Result[S]{}, fmt.Errorf("append %s: encode state: %w", ref, err)
	}
	req.State, req.Outbound = data, outbound
	ar, err := f.cfg.Store.Append(ctx, req)
	if err != nil {
		return Result[S]{}, err // the store names the aggregate
	}
	if ar.Duplicate {
		f.cfg.Logger.DebugContext(ctx, "duplicate command", "aggregate", ref.String(), "command_id", req.CommandID, "version", ar.LastSeq)
		cur, err := f.Get(ctx, ref.ID)
		if err != nil {
			return Result[S]{}, fmt.Errorf("append %s: duplicate command %s: %w", ref, req.CommandID, err)
		}
		return Result[S]{State: cur, Duplicate: true, Append: ar}, nil
	}
	item, err := f.decode(data) // a copy the caller owns
	if err != nil {
		return Result[S]{}, fmt.Errorf("append %s: %w", ref, err)
	}
	var written *StateCondition
	if ar.StateRevision != "" {
		written = &StateCondition{Revision: ar.StateRevision}
	}
	return Result[S]{
		State:    State[S]{Ref: ref, Seq: req.NewVersion(), Item: item, IfState: written},
		Events:   ar.Events,
		Outbound: outbound,
		Append:   ar,
	}, nil
}

func (f *Facet[S]) duplicate(ctx context.Context, ref Ref, commandID string) (Result[S], error) {
	ar, err := f.cfg.Store.CommandResult(ctx, ref, commandID)
	if err != nil {
		return Result[S]{}, err
	}
	cur, err := f.Get(ctx, ref.ID)
	if err != nil {
		return Result[S]{}, err
	}
	return Result[S]{State: cur, Duplicate: true, Append: ar}, nil
}

// Load computes aggregate id's state the event-sourcing way, for command handlers
// that do not trust or use STATE: the latest snapshot (if any) plus the
// events after it, through the rules. Outbound events are not collected.
// Returns ErrAggregateNotFound when there is neither snapshot nor event.
//
// A facet with history rules ignores the snapshot and replays the whole
// log (Processor.Replay), so that those rules see the past: a snapshot
// holds a state, not the events before it. A facet whose history rules
// all fold (FoldRules) uses a snapshot that holds their folds beside the
// state, as Snapshot writes them, and replays the whole log when the
// snapshot holds none (an older snapshot, or a fold key it lacks).
func (f *Facet[S]) Load(ctx context.Context, id string) (State[S], error) {
	cur, _, err := f.load(ctx, id)
	return cur, err
}

// load is Load, also returning the folds after the state.
func (f *Facet[S]) load(ctx context.Context, id string) (State[S], *folds, error) {
	ref := f.ref(id)
	if err := ref.Validate(); err != nil {
		return State[S]{}, nil, fmt.Errorf("load %s: %w", ref, err)
	}
	if !f.readsSnapshots() {
		return f.loadAll(ctx, ref)
	}
	cur, fs, err := f.snapshot(ctx, ref)
	if err != nil {
		return State[S]{}, nil, fmt.Errorf("load %s: %w", ref, err)
	}
	events, err := f.cfg.Store.Load(ctx, ref, cur.Seq)
	if err != nil {
		return State[S]{}, nil, fmt.Errorf("load %s: %w", ref, err)
	}
	if cur.Item, _, err = f.cfg.Processor.applyFolded(cur.Item, fs, events); err != nil {
		return State[S]{}, nil, fmt.Errorf("load %s: replay: %w", ref, err)
	}
	if len(events) > 0 {
		cur.Seq = events[len(events)-1].Sequence
	}
	return cur, fs, nil
}

// snapshot returns where to rebuild aggregate ref from: its latest
// snapshot, state and folds, or the initial state and folds at sequence
// 0 when there is none, or none that holds the processor's folds.
func (f *Facet[S]) snapshot(ctx context.Context, ref Ref) (State[S], *folds, error) {
	start := State[S]{Ref: ref, Item: f.cfg.Processor.Initial()}
	snap, err := f.cfg.Store.Snapshot(ctx, ref)
	switch {
	case errors.Is(err, ErrAggregateNotFound):
		return start, f.cfg.Processor.startFolds(), nil
	case err != nil:
		return State[S]{}, nil, err
	}
	data, fs, err := f.cfg.Processor.decodeSnapshot(snap.Data, snap.Seq, upcasterChain(f.schema.Types, f.cfg.Upcasters))
	if err != nil {
		return State[S]{}, nil, fmt.Errorf("snapshot at %d: %w", snap.Seq, err)
	}
	if fs == nil {
		return start, f.cfg.Processor.startFolds(), nil
	}
	item, err := f.decode(data)
	if err != nil {
		return State[S]{}, nil, fmt.Errorf("snapshot at %d: %w", snap.Seq, err)
	}
	return State[S]{Ref: ref, Seq: snap.Seq, Item: item}, fs, nil
}

// loadAll is Load from the whole log, without the snapshot.
func (f *Facet[S]) loadAll(ctx context.Context, ref Ref) (State[S], *folds, error) {
	events, err := f.cfg.Store.Load(ctx, ref, 0)
	if err == nil && len(events) == 0 {
		err = ErrAggregateNotFound
	}
	if err != nil {
		return State[S]{}, nil, fmt.Errorf("load %s: %w", ref, err)
	}
	item, fs, err := f.cfg.Processor.replay(events)
	if err != nil {
		return State[S]{}, nil, fmt.Errorf("load %s: replay: %w", ref, err)
	}
	return State[S]{Ref: ref, Seq: events[len(events)-1].Sequence, Item: item}, fs, nil
}

// Snapshot loads aggregate id (snapshot plus later events) and stores the
// result as its new #SNAPSHOT, returning it. A snapshot is an
// optimisation off the write path: a later trigger calls this every N
// events. A concurrent snapshot at a later sequence wins. The snapshot of
// a facet with FoldRules holds their folds' accumulators beside the state
// (what AppendWithHistory and Load start from); a facet with history
// rules writes snapshots but neither reads them.
func (f *Facet[S]) Snapshot(ctx context.Context, id string) (State[S], error) {
	cur, fs, err := f.load(ctx, id)
	if err != nil {
		return State[S]{}, fmt.Errorf("snapshot: %w", err)
	}
	data, err := f.cfg.Processor.encodeSnapshot(cur.Item, fs, upcasterChain(f.schema.Types, f.cfg.Upcasters))
	if err != nil {
		return State[S]{}, fmt.Errorf("snapshot %s: encode state: %w", cur.Ref, err)
	}
	if err := f.cfg.Store.PutSnapshot(ctx, cur.Ref, Stored{Seq: cur.Seq, Data: data, UpdatedAt: time.Now().UTC()}); err != nil {
		return State[S]{}, fmt.Errorf("snapshot %s: %w", cur.Ref, err)
	}
	return cur, nil
}

func (f *Facet[S]) decode(data json.RawMessage) (S, error) {
	s := f.cfg.Processor.Initial()
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("decode state: %w", err)
	}
	return s, nil
}

func (f *Facet[S]) clone(s S) (S, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return s, fmt.Errorf("encode state: %w", err)
	}
	return f.decode(b)
}
