// Package storetest is the contract test suite of eventstore.Store: what
// every store must do, checked the same way of each. Run it from a test
// of a store package (eventstore/memstore, eventstore/dynamodb, or a
// store of your own):
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, schema eventstore.Schema) storetest.Subject {
//			s, err := mystore.New(mystore.Config{Schema: schema})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return storetest.Subject{Store: s}
//		})
//	}
//
// Each subtest opens its own store with the schema it needs. It names its
// aggregates, and the event types it reads by type, with a random token,
// so data the store already holds (a table shared between runs) does not
// disturb it. The suite reads nothing but the Store interface, plus
// eventstore.TypeReader, LoadPage and eventstore.AggregateLister when the store has
// them, and the outbox through Subject.Outbound when it is set; the
// subtests of what a store lacks are skipped, saying so.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// Subject is a store under test.
type Subject struct {
	// Store is the store. Required.
	Store eventstore.Store
	// Outbound, when set, returns the outbound records stored for ref in
	// (Seq, Index) order, so the suite can check that they are written
	// with their events or not at all. Nil skips those checks.
	Outbound func(ctx context.Context, ref eventstore.Ref) ([]eventstore.OutboundRecord, error)
	// Settle bounds how long by-type reads and ListAggregates may lag
	// behind appends (an eventually consistent index); the suite polls
	// that long before failing. Default integration.HangAfter(): a store
	// that is slow on a loaded machine is no failure, one whose index
	// never catches up is.
	Settle time.Duration
}

// Opener returns an empty store that knows schema (its event types and
// upcasters) for the subtest t, releasing it with t.Cleanup. It is called
// once per subtest, possibly from parallel subtests.
type Opener func(t *testing.T, schema eventstore.Schema) Subject

// PageLoader is the paged read of one aggregate's log that
// eventstore/dynamodb and eventstore/memstore have; a store that has it
// is checked by the suite.
type PageLoader interface {
	LoadPage(ctx context.Context, ref eventstore.Ref, afterSeq int64, limit int) ([]eventstore.Envelope, error)
}

// Run runs the contract suite against the stores open returns, one
// subtest per promise (they run in parallel):
//
//   - AppendAndLoad: an append's result, Load from 0 and after a
//     sequence, Version.
//   - NotFound: the reads of an unknown aggregate, an append expecting a
//     version of it.
//   - ExpectedVersion: stale, future and "new" expected versions are
//     *eventstore.ConcurrencyError (Expected, Actual) and write nothing.
//   - StateAndOutboxCommitTogether: STATE and OUTBOUND records are
//     written with their events, rewritten STATE alone at the same
//     version, and nothing of a failed append.
//   - StateRevision: every STATE write has a new revision, which State
//     returns; an append with IfState requires it (none: no revision)
//     with the version, and fails with *eventstore.ConcurrencyError
//     (StateRewritten) after a STATE-only rewrite, writing nothing.
//   - DuplicateCommand: a second append with a command id writes nothing
//     and returns the first result with Duplicate; CommandResult agrees.
//   - RecordRefusal: a refusal is the answer every later append, refusal
//     and CommandResult gets; a refusal after an append gets the append;
//     bad input is rejected; a long reason is cut as Refusal.Recorded says.
//   - RefusalRacesAppend: racing appends and refusals of one command id
//     end with exactly one answer that every caller gets.
//   - Snapshots: never ahead of the log, never backwards.
//   - ByType: TypeReader pages (cursors, limits, After, From/To), counts,
//     and rejects bad cursors.
//   - Upcasting: old events read as current through the schema on Load,
//     LoadPage and ListByType.
//   - BadInputWritesNothing: every *eventstore.ValidationError and size
//     limit (ErrItemTooLarge, ErrTooManyItems, ErrTransactionTooLarge)
//     leaves the store as it was.
//   - ConcurrentAppenders: goroutines racing on one aggregate: exactly
//     one wins each version, the others get *eventstore.ConcurrencyError,
//     and the log has no gap.
//   - LoadPageAndListAggregates: the paged log read and the aggregate
//     listing (pages, After, Limit, bad queries), when the store has them.
func Run(t *testing.T, open Opener) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"AppendAndLoad", testAppendAndLoad},
		{"NotFound", testNotFound},
		{"ExpectedVersion", testExpectedVersion},
		{"StateAndOutboxCommitTogether", testStateAndOutbox},
		{"StateRevision", testStateRevision},
		{"DuplicateCommand", testDuplicateCommand},
		{"RecordRefusal", testRecordRefusal},
		{"RefusalRacesAppend", testRefusalRacesAppend},
		{"Snapshots", testSnapshots},
		{"ByType", testByType},
		{"Upcasting", testUpcasting},
		{"BadInputWritesNothing", testBadInput},
		{"ConcurrentAppenders", testConcurrentAppenders},
		{"LoadPageAndListAggregates", testLoadPageAndListAggregates},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// env is one subtest's store, schema and names.
type env struct {
	t      *testing.T
	ctx    context.Context
	sub    Subject
	s      eventstore.Store
	schema eventstore.Schema
	token  string
}

// setup opens a store with schema for t.
func setup(t *testing.T, open Opener, schema eventstore.Schema) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	t.Cleanup(cancel)
	sub := open(t, schema)
	if sub.Store == nil {
		t.Fatal("storetest: the opener returned no Store")
	}
	if sub.Settle <= 0 {
		sub.Settle = integration.HangAfter()
	}
	return &env{t: t, ctx: ctx, sub: sub, s: sub.Store, schema: schema, token: token(t)}
}

// token is a random name part that keeps subtests sharing a store apart.
func token(t *testing.T) string {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random token: %v", err)
	}
	return hex.EncodeToString(b[:])
}

// ref names an aggregate of this subtest.
func (e *env) ref(name string) eventstore.Ref {
	return eventstore.Ref{Type: "storetest", ID: name + "-" + e.token}
}

// prepare builds a request appending events of the given types (payload
// {"n": i}) to ref at expected.
func (e *env) prepare(ref eventstore.Ref, expected int64, commandID string, types ...string) eventstore.AppendRequest {
	e.t.Helper()
	ch := eventstore.Change{CommandID: commandID}
	for i, typ := range types {
		ch.Events = append(ch.Events, eventstore.Event(typ, map[string]int{"n": i}))
	}
	req, err := eventstore.Prepare(ref, expected, ch, e.schema)
	if err != nil {
		e.t.Fatalf("prepare: %v", err)
	}
	return req
}

// mustAppend appends req and fails the test on an error or a duplicate.
func (e *env) mustAppend(req eventstore.AppendRequest) eventstore.AppendResult {
	e.t.Helper()
	res, err := e.s.Append(e.ctx, req)
	if err != nil {
		e.t.Fatalf("append %s at %d: %v", req.Aggregate, req.ExpectedVersion, err)
	}
	if res.Duplicate {
		e.t.Fatalf("append %s at %d: Duplicate set on a first append", req.Aggregate, req.ExpectedVersion)
	}
	return res
}

// load returns ref's whole log, failing the test on an error.
func (e *env) load(ref eventstore.Ref) []eventstore.Envelope {
	e.t.Helper()
	evs, err := e.s.Load(e.ctx, ref, 0)
	if err != nil {
		e.t.Fatalf("load %s: %v", ref, err)
	}
	return evs
}

// snapshotOf renders everything the store shows of ref through the
// interface (log, version, STATE, snapshot, outbox and the given command
// ids' answers), to compare before and after an operation that must not
// write.
func (e *env) snapshotOf(ref eventstore.Ref, commandIDs ...string) string {
	e.t.Helper()
	var b strings.Builder
	evs, err := e.s.Load(e.ctx, ref, 0)
	fmt.Fprintf(&b, "log: %s err=%v\n", marshalAll(e.t, evs), errors.Is(err, eventstore.ErrAggregateNotFound))
	v, err := e.s.Version(e.ctx, ref)
	fmt.Fprintf(&b, "version: %d err=%v\n", v, errors.Is(err, eventstore.ErrAggregateNotFound))
	st, err := e.s.State(e.ctx, ref)
	fmt.Fprintf(&b, "state: %d %s err=%v\n", st.Seq, st.Data, errors.Is(err, eventstore.ErrAggregateNotFound))
	sn, err := e.s.Snapshot(e.ctx, ref)
	fmt.Fprintf(&b, "snapshot: %d %s err=%v\n", sn.Seq, sn.Data, errors.Is(err, eventstore.ErrAggregateNotFound))
	if e.sub.Outbound != nil {
		obs, err := e.sub.Outbound(e.ctx, ref)
		if err != nil {
			e.t.Fatalf("outbound of %s: %v", ref, err)
		}
		for _, o := range obs {
			fmt.Fprintf(&b, "outbound: %d/%d %s %s %s\n", o.Seq, o.Index, o.Name, o.EventID, o.Payload)
		}
	}
	for _, id := range commandIDs {
		res, err := e.s.CommandResult(e.ctx, ref, id)
		fmt.Fprintf(&b, "command %s: %d..%d %v err=%v\n", id, res.FirstSeq, res.LastSeq, res.EventIDs, err)
	}
	return b.String()
}

func marshalAll(t *testing.T, evs []eventstore.Envelope) string {
	t.Helper()
	parts := make([]string, len(evs))
	for i, e := range evs {
		b, err := eventstore.Marshal(e)
		if err != nil {
			t.Fatalf("marshal %s: %v", e, err)
		}
		parts[i] = string(b)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// eventually polls check until it returns nil or the subject's Settle
// time passes, then fails the test with the last error.
func (e *env) eventually(what string, check func() error) {
	e.t.Helper()
	deadline := time.Now().Add(e.sub.Settle)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %v (after %v)", what, err, e.sub.Settle)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// asConflict returns the *eventstore.ConcurrencyError in err, or nil.
func asConflict(err error) *eventstore.ConcurrencyError {
	var ce *eventstore.ConcurrencyError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// restage renumbers req's events to another expected version.
func restage(req eventstore.AppendRequest, expected int64) eventstore.AppendRequest {
	req.ExpectedVersion = expected
	req.Events = append([]eventstore.Envelope(nil), req.Events...)
	for i := range req.Events {
		req.Events[i].Sequence = expected + int64(i) + 1
	}
	return req
}
