package storetest

import (
	"encoding/json"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

// testStateRevision checks the STATE revision: every STATE write has a
// new one, State returns it, and an append with IfState is conditional
// on it in the same check as the version.
func testStateRevision(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	ref := e.ref("ledger")

	// A new aggregate has no STATE: IfState "" holds.
	first := e.prepare(ref, 0, "", "Opened")
	first.State, first.IfState = json.RawMessage(`{"balance":0}`), &eventstore.StateCondition{}
	res := e.mustAppend(first)
	st, err := e.s.State(e.ctx, ref)
	if err != nil || res.StateRevision == "" || st.Revision != res.StateRevision {
		t.Fatalf("after the first append: result revision %q, State %+v, %v; want the same non-empty revision", res.StateRevision, st, err)
	}
	read := st.Revision

	// A STATE-only rewrite at the same version: a new revision.
	rw, err := e.s.Append(e.ctx, eventstore.AppendRequest{Aggregate: ref, ExpectedVersion: 1, State: json.RawMessage(`{"balance":0,"fixed":true}`)})
	if err != nil || rw.StateRevision == "" || rw.StateRevision == read {
		t.Fatalf("STATE-only rewrite: %+v, %v; want a revision other than %q", rw, err, read)
	}
	if st, err := e.s.State(e.ctx, ref); err != nil || st.Revision != rw.StateRevision {
		t.Fatalf("State after the rewrite: %+v, %v; want revision %q", st, err, rw.StateRevision)
	}

	// An append decided on the STATE before the rewrite fails, whatever
	// else it holds, and writes nothing; so does one that read no STATE.
	before := e.snapshotOf(ref)
	for name, cond := range map[string]*eventstore.StateCondition{"the old revision": {Revision: read}, "no STATE": {}} {
		req := e.prepare(ref, 1, "", "Deposited")
		req.State, req.IfState = json.RawMessage(`{"balance":10}`), cond
		req.Outbound = []eventstore.Outbound{{Seq: 2, Name: "Deposited", Payload: json.RawMessage(`{}`)}}
		_, err := e.s.Append(e.ctx, req)
		ce := asConflict(err)
		if ce == nil || !ce.StateRewritten || ce.Expected != 1 || ce.Actual != 1 || ce.Aggregate != ref {
			t.Errorf("append at the version on %s: %v; want *ConcurrencyError{StateRewritten, Expected 1, Actual 1}", name, err)
		}
	}
	if after := e.snapshotOf(ref); after != before {
		t.Fatalf("appends refused for their STATE wrote:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// On the current revision it goes through, and a stale version is a
	// plain conflict, StateRewritten unset.
	ok := e.prepare(ref, 1, "", "Deposited")
	ok.State, ok.IfState = json.RawMessage(`{"balance":10}`), &eventstore.StateCondition{Revision: rw.StateRevision}
	res = e.mustAppend(ok)
	if res.StateRevision == "" || res.StateRevision == rw.StateRevision {
		t.Fatalf("append on the current revision wrote revision %q, want a new one", res.StateRevision)
	}
	stale := e.prepare(ref, 1, "", "Deposited")
	stale.State, stale.IfState = json.RawMessage(`{"balance":20}`), &eventstore.StateCondition{Revision: read}
	if _, err := e.s.Append(e.ctx, stale); asConflict(err) == nil || asConflict(err).StateRewritten || asConflict(err).Actual != 2 {
		t.Fatalf("append at a stale version: %v; want *ConcurrencyError{Actual 2} without StateRewritten", err)
	}

	// IfState needs a STATE to write.
	bare := e.prepare(ref, 2, "", "Deposited")
	bare.IfState = &eventstore.StateCondition{Revision: res.StateRevision}
	if _, err := e.s.Append(e.ctx, bare); !isValidation(err, "if_state") {
		t.Fatalf("IfState without State: %v; want *ValidationError on if_state", err)
	}
}
