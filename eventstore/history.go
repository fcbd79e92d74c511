package eventstore

import (
	"bytes"
	"container/list"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// HistoryRule is a Rule that also sees the aggregate's events around ev:
// the stored events before it and the other events of its append (h). It
// is for rules whose answer depends on more than the state, e.g. "refuse
// a transaction whose description was already used" or "at most three
// withdrawals a day", when the state does not (or did not always) carry
// what they need. Everything said of Rule holds: pure, no I/O, a state of
// its own. h and the events in it belong to the processor and must not be
// modified.
//
// The past costs reads: it is only loaded by Facet.Recalculate and
// Facet.Load (and Processor.ApplyWithHistory and Processor.Replay). On
// Facet.Append and Facet.AppendTo, which read only STATE, h.PastLoaded is
// false; a rule that needs the past returns h.RequirePast() then, which
// fails the append with ErrPastNotLoaded.
type HistoryRule[S any] func(state S, ev Envelope, h History, out *Outbox) (S, error)

// OnHistory adapts a history rule that wants the payload decoded as E. A
// payload that does not decode into E is a *ValidationError on "payload".
// Events in h are not decoded (use Envelope.DecodePayload).
func OnHistory[S, E any](fn func(state S, ev E, h History, out *Outbox) (S, error)) HistoryRule[S] {
	return func(state S, env Envelope, h History, out *Outbox) (S, error) {
		var ev E
		if err := env.DecodePayload(&ev); err != nil {
			return state, &ValidationError{Field: "payload", Reason: err.Error()}
		}
		return fn(state, ev, h, out)
	}
}

// History is what a HistoryRule sees besides the state and the event ev
// it applies. Always ev == New[Index], and the events before ev, in
// sequence order, are Past followed by New[:Index] (see Before).
//
//   - Appending (Processor.Apply, Facet.Append, Facet.AppendTo): New is
//     the append's events, Index ev's position in them; the past was not
//     read, so Past is nil and PastLoaded false.
//   - Recalculating with new events (Processor.ApplyWithHistory,
//     Facet.Recalculate): Past is every stored event, PastLoaded true,
//     New and Index as when appending.
//   - Replaying a stored event (Processor.Replay, as Facet.Recalculate and
//     Facet.Load do first): Past is the stored events before ev,
//     PastLoaded true, New is just ev and Index 0 (which events were
//     appended together is not recorded), Replayed true. So a rule that
//     decides from Before alone decides a replay as it decided the append.
type History struct {
	// Past are the aggregate's stored events before those being applied,
	// from sequence 1, in order. Nil when PastLoaded is false.
	Past []Envelope
	// PastLoaded says Past is complete: the caller read the aggregate's
	// whole log. When false, an empty Past says nothing about the log.
	PastLoaded bool
	// New are the events being applied together, ev among them.
	New []Envelope
	// Index is ev's position in New.
	Index int
	// Replayed is set when ev is a stored event being replayed: it was
	// accepted once, its outbound events are discarded, and refusing it
	// now fails the replay (a rule may choose to enforce a newer policy
	// only on events that are not replayed).
	Replayed bool
}

// Before returns the events before ev in sequence order: Past followed by
// New[:Index]. Valid only when PastLoaded; otherwise it is New[:Index].
// The result must not be modified; it may share memory with the log.
func (h History) Before() []Envelope {
	switch {
	case h.Index == 0:
		return h.Past[:len(h.Past):len(h.Past)]
	case len(h.Past) == 0:
		return h.New[:h.Index:h.Index]
	}
	all := make([]Envelope, 0, len(h.Past)+h.Index)
	return append(append(all, h.Past...), h.New[:h.Index]...)
}

// RequirePast returns nil when the past was loaded, else ErrPastNotLoaded.
// A history rule that needs the past starts with it:
//
//	if err := h.RequirePast(); err != nil {
//		return state, err
//	}
func (h History) RequirePast() error {
	if h.PastLoaded {
		return nil
	}
	return ErrPastNotLoaded
}

// ErrPastNotLoaded is returned (wrapped, with the event type and
// sequence) when a history rule needs the aggregate's past events and the
// call did not read them: Facet.Append, Facet.AppendTo, Processor.Apply.
// Use Facet.Recalculate, which reads every event, to append instead.
// Nothing was written. It is permanent (IsPermanent): the same append
// fails the same way.
var ErrPastNotLoaded error = permanentError("rule needs the aggregate's past events, which were not read: use Facet.Recalculate")

// permanentError is a sentinel error that IsPermanent reports as
// permanent.
type permanentError string

func (e permanentError) Error() string { return string(e) }

// Permanent makes IsPermanent true.
func (permanentError) Permanent() bool { return true }

// checkLog reports, as a *ValidationError on field, a log whose events do
// not carry the sequences from+1, from+2, … in order: the past a history
// rule sees must be the whole log, without gap.
func checkLog(field string, events []Envelope, from int64) error {
	for i, ev := range events {
		if want := from + int64(i) + 1; ev.Sequence != want {
			return &ValidationError{Field: field, Reason: fmt.Sprintf("event %d has sequence %d, want %d (not the whole log in order)", i, ev.Sequence, want)}
		}
	}
	return nil
}

// Fold is how a fold rule sees an aggregate's past: not as events but as
// an accumulator of type A that starts at Initial() and takes every
// stored event of the aggregate, whatever its type, in sequence order
// (Step). Step is pure, like a Rule; it may modify acc and return it. A
// must survive a JSON round trip: a facet's #SNAPSHOT stores it under Key
// beside the state, so that a command reads the latest snapshot and the
// events after it instead of the whole log. Keep A small: the snapshot is
// one DynamoDB item (at most 400 KB, dynamodb.MaxItemSize).
type Fold[A any] struct {
	// Key names the accumulator in snapshots (a name, see ValidateName),
	// unique among a processor's folds. Change it when Step changes
	// meaning: a snapshot without the key is not used, and the past is
	// folded again from the log until the next snapshot.
	Key string
	// Initial is the accumulator of an aggregate without events.
	Initial func() A
	// Step returns the accumulator after ev. An error fails the call
	// that applies or replays ev.
	Step func(acc A, ev Envelope) (A, error)
}

// FoldRule is a history rule that declares a Fold: it sees the past only
// as the fold's accumulator after the events before ev (the stored ones,
// then those of the same append before ev), so a facet can give it the
// past from the latest snapshot plus later events. Build one with Folding
// or OnFold and put it in Processor.FoldRules. Everything said of Rule
// holds. Without the past (Processor.Apply, Facet.Append, Facet.AppendTo)
// it fails with ErrPastNotLoaded.
type FoldRule[S any] interface {
	foldKey() string
	validate() error
	initialAcc() any
	step(acc any, ev Envelope) (any, error)
	decodeAcc(data json.RawMessage) (any, error)
	apply(state S, ev Envelope, acc any, out *Outbox) (S, error)
}

// Folding returns the FoldRule that applies ev with rule, given fold's
// accumulator after the events before ev. rule must not modify acc.
func Folding[S, A any](fold Fold[A], rule func(state S, ev Envelope, acc A, out *Outbox) (S, error)) FoldRule[S] {
	return foldRule[S, A]{fold: fold, rule: rule}
}

// OnFold is Folding for a rule that wants the payload decoded as E. A
// payload that does not decode into E is a *ValidationError on "payload".
func OnFold[S, E, A any](fold Fold[A], rule func(state S, ev E, acc A, out *Outbox) (S, error)) FoldRule[S] {
	return Folding(fold, func(state S, env Envelope, acc A, out *Outbox) (S, error) {
		var ev E
		if err := env.DecodePayload(&ev); err != nil {
			return state, &ValidationError{Field: "payload", Reason: err.Error()}
		}
		return rule(state, ev, acc, out)
	})
}

// foldRule is the FoldRule built by Folding, its accumulator boxed.
type foldRule[S, A any] struct {
	fold Fold[A]
	rule func(state S, ev Envelope, acc A, out *Outbox) (S, error)
}

func (r foldRule[S, A]) foldKey() string { return r.fold.Key }

func (r foldRule[S, A]) validate() error {
	if err := ValidateName("fold key", r.fold.Key); err != nil {
		return err
	}
	if r.fold.Initial == nil || r.fold.Step == nil || r.rule == nil {
		return fmt.Errorf("fold %q: Initial, Step and the rule are required", r.fold.Key)
	}
	return nil
}

func (r foldRule[S, A]) initialAcc() any { return r.fold.Initial() }

func (r foldRule[S, A]) step(acc any, ev Envelope) (any, error) {
	return r.fold.Step(acc.(A), ev)
}

func (r foldRule[S, A]) decodeAcc(data json.RawMessage) (any, error) {
	acc := r.fold.Initial()
	if err := json.Unmarshal(data, &acc); err != nil {
		return nil, fmt.Errorf("decode fold %s: %w", r.fold.Key, err)
	}
	return acc, nil
}

func (r foldRule[S, A]) apply(state S, ev Envelope, acc any, out *Outbox) (S, error) {
	return r.rule(state, ev, acc.(A), out)
}

// folds holds the accumulators of a processor's fold rules, by key,
// after the event with sequence seq. Stepping modifies it in place: a
// call that fails leaves it half-stepped, and it is then discarded.
type folds struct {
	seq  int64
	accs map[string]any
}

// startFolds returns the accumulators of an aggregate without events.
func (p Processor[S]) startFolds() *folds {
	fs := &folds{accs: make(map[string]any, len(p.FoldRules))}
	for _, r := range p.FoldRules {
		fs.accs[r.foldKey()] = r.initialAcc()
	}
	return fs
}

// stepFolds moves every accumulator past ev (which must be event
// fs.seq+1, as checkLog ensures of the callers' logs). While it steps,
// and after a failure, fs.seq is -1: fs matches no log.
func (p Processor[S]) stepFolds(fs *folds, ev Envelope) error {
	fs.seq = -1
	for _, r := range p.FoldRules {
		k := r.foldKey()
		acc, err := r.step(fs.accs[k], ev)
		if err != nil {
			return fmt.Errorf("fold %s (sequence %d): %w", k, ev.Sequence, err)
		}
		fs.accs[k] = acc
	}
	fs.seq = ev.Sequence
	return nil
}

// foldLog returns the accumulators after log, an aggregate's stored
// events from sequence fs.seq+1 on (checked).
func (p Processor[S]) foldLog(fs *folds, log []Envelope) error {
	if err := checkLog("past", log, fs.seq); err != nil {
		return err
	}
	for _, ev := range log {
		if err := p.stepFolds(fs, ev); err != nil {
			return err
		}
	}
	return nil
}

// applyFolded is Apply for events that follow the log summarised by fs
// (sequences fs.seq+1, … else a *ValidationError on "events"): fold rules
// see fs, which moves past the events applied. History rules see no past.
func (p Processor[S]) applyFolded(state S, fs *folds, events []Envelope) (S, []Outbound, error) {
	if err := checkLog("events", events, fs.seq); err != nil {
		return state, nil, err
	}
	return p.apply(state, History{}, fs, events)
}

// snapshotDoc is the #SNAPSHOT of a facet with fold rules: the state and
// each fold's accumulator (by key) after the snapshot's sequence. Format
// tells it from a snapshot that holds only a state.
type snapshotDoc struct {
	Format int                        `json:"eventpipe_snapshot"`
	State  json.RawMessage            `json:"state"`
	Folds  map[string]json.RawMessage `json:"folds"`
	// Chain is the upcaster chain the snapshot was taken under
	// (upcasterChain); a snapshot under another one is not read.
	Chain string `json:"chain,omitempty"`
}

// upcasterChain names the schema versions events of types are read at
// through u: "Type@version" of each type with an upcaster, sorted, ""
// when none has one. A snapshot's state folds events as they read when it
// was taken: under another chain (an upcaster added) it would mix old and
// new readings, so the facet folds the log instead.
func upcasterChain(types EventTypes, u *Upcasters) string {
	var parts []string
	for t := range types {
		if v := u.Current(t); v > 1 {
			parts = append(parts, fmt.Sprintf("%s@%d", t, v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// foldedSnapshot is snapshotDoc.Format.
const foldedSnapshot = 1

// encodeSnapshot returns the snapshot document of state and fs: the
// state's JSON alone when the processor has no fold rules (or fs is nil).
func (p Processor[S]) encodeSnapshot(state S, fs *folds, chain string) (json.RawMessage, error) {
	data, err := json.Marshal(state)
	if err != nil || ((len(p.FoldRules) == 0 || fs == nil) && chain == "") {
		return data, err
	}
	doc := snapshotDoc{Format: foldedSnapshot, State: data, Chain: chain}
	if len(p.FoldRules) == 0 || fs == nil {
		return json.Marshal(doc)
	}
	doc.Folds = make(map[string]json.RawMessage, len(fs.accs))
	for k, acc := range fs.accs {
		if doc.Folds[k], err = json.Marshal(acc); err != nil {
			return nil, fmt.Errorf("encode fold %s: %w", k, err)
		}
	}
	return json.Marshal(doc)
}

// decodeSnapshot splits a snapshot document at seq into the state's JSON
// and the accumulators of p's fold rules. fs is nil when the document
// holds only a state or lacks a fold's key (then the past must be folded
// from the log), and when it was taken under another upcaster chain than
// chain (then the snapshot is not used at all); a processor without fold
// rules gets an empty fs.
func (p Processor[S]) decodeSnapshot(data json.RawMessage, seq int64, chain string) (json.RawMessage, *folds, error) {
	var doc snapshotDoc
	if !bytes.Contains(data, []byte(`"eventpipe_snapshot"`)) || json.Unmarshal(data, &doc) != nil || doc.Format != foldedSnapshot {
		if chain != "" { // a plain state, taken with no upcaster
			return nil, nil, nil
		}
		if len(p.FoldRules) > 0 {
			return data, nil, nil
		}
		return data, &folds{seq: seq}, nil
	}
	if doc.Chain != chain {
		return nil, nil, nil
	}
	fs := &folds{seq: seq, accs: make(map[string]any, len(p.FoldRules))}
	for _, r := range p.FoldRules {
		k := r.foldKey()
		raw, ok := doc.Folds[k]
		if !ok {
			return doc.State, nil, nil
		}
		acc, err := r.decodeAcc(raw)
		if err != nil {
			return nil, nil, err
		}
		fs.accs[k] = acc
	}
	return doc.State, fs, nil
}

// foldCache keeps the folds of recently appended aggregates, at most max,
// least recently used dropped first. An entry is taken out while a call
// uses it, so no two calls share one. Folds at sequence n stay right for
// as long as the log's events 1..n do, which the store never changes.
type foldCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *foldEntry, most recently used first
	byRef map[Ref]*list.Element
}

type foldEntry struct {
	ref Ref
	fs  *folds
}

// newFoldCache returns a cache of max entries; nil (no cache) when max <
// 1.
func newFoldCache(max int) *foldCache {
	if max < 1 {
		return nil
	}
	return &foldCache{max: max, order: list.New(), byRef: make(map[Ref]*list.Element)}
}

// take removes and returns ref's folds, or nil.
func (c *foldCache) take(ref Ref) *folds {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byRef[ref]
	if !ok {
		return nil
	}
	delete(c.byRef, ref)
	c.order.Remove(e)
	return e.Value.(*foldEntry).fs
}

// put keeps fs as ref's folds, unless the cache holds later ones.
func (c *foldCache) put(ref Ref, fs *folds) {
	if c == nil || fs.seq < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byRef[ref]; ok {
		if e.Value.(*foldEntry).fs.seq >= fs.seq {
			return
		}
		e.Value.(*foldEntry).fs = fs
		c.order.MoveToFront(e)
		return
	}
	c.byRef[ref] = c.order.PushFront(&foldEntry{ref: ref, fs: fs})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byRef, last.Value.(*foldEntry).ref)
	}
}
