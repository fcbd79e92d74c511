package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

func testDuplicateCommand(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	ref := e.ref("order")
	first := e.mustAppend(e.prepare(ref, 0, "cmd-1", "Placed", "Paid"))
	after := e.snapshotOf(ref, "cmd-1")
	same := func(what string, res eventstore.AppendResult) {
		t.Helper()
		if !res.Duplicate || res.Aggregate != ref || res.FirstSeq != first.FirstSeq || res.LastSeq != first.LastSeq ||
			fmt.Sprint(res.EventIDs) != fmt.Sprint(first.EventIDs) || len(res.Events) != 0 {
			t.Fatalf("%s = %+v; want the first result %+v with Duplicate and no Events", what, res, first)
		}
	}
	// Redeliveries decided on a stale version, on the current one, and
	// with other events: all answered by the record, none written.
	for _, req := range []eventstore.AppendRequest{
		e.prepare(ref, 0, "cmd-1", "Placed", "Paid"),
		e.prepare(ref, 2, "cmd-1", "Placed", "Paid"),
		e.prepare(ref, 2, "cmd-1", "Cancelled"),
	} {
		res, err := e.s.Append(e.ctx, req)
		if err != nil {
			t.Fatalf("redelivery at %d: %v; want the first result", req.ExpectedVersion, err)
		}
		same(fmt.Sprintf("redelivery at %d", req.ExpectedVersion), res)
	}
	if got := e.snapshotOf(ref, "cmd-1"); got != after {
		t.Fatalf("redeliveries wrote:\nbefore:\n%s\nafter:\n%s", after, got)
	}
	res, err := e.s.CommandResult(e.ctx, ref, "cmd-1")
	if err != nil {
		t.Fatalf("CommandResult: %v", err)
	}
	same("CommandResult", res)
	// The record belongs to its aggregate: the same id elsewhere is new.
	other := e.ref("other")
	if res := e.mustAppend(e.prepare(other, 0, "cmd-1", "Placed")); res.LastSeq != 1 {
		t.Fatalf("the same command id on another aggregate: %+v", res)
	}
	if _, err := e.s.CommandResult(e.ctx, ref, "cmd-2"); !errors.Is(err, eventstore.ErrCommandNotFound) {
		t.Fatalf("CommandResult of an unknown id: %v; want ErrCommandNotFound", err)
	}
}

func testRecordRefusal(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	ref := e.ref("account")
	e.mustAppend(e.prepare(ref, 0, "", "Opened"))
	first := eventstore.Refusal{Status: "rejected", Reason: "insufficient funds", Code: "account.insufficient_funds", Version: 1}
	if res, err := e.s.RecordRefusal(e.ctx, ref, "cmd-r", first); err != nil || res.Duplicate || res.LastSeq != 0 {
		t.Fatalf("RecordRefusal = %+v, %v; want it recorded (a zero result)", res, err)
	}
	before := e.snapshotOf(ref)
	wantFirst := func(what string, err error) {
		t.Helper()
		var refused *eventstore.RefusedCommandError
		if !errors.As(err, &refused) || refused.Refusal != first || refused.CommandID != "cmd-r" || refused.Aggregate != ref {
			t.Fatalf("%s: %v; want *RefusedCommandError with %+v", what, err, first)
		}
		if !errors.Is(err, first.Code) {
			t.Fatalf("%s: %v does not match its recorded code %q with errors.Is", what, err, first.Code)
		}
	}
	_, err := e.s.Append(e.ctx, e.prepare(ref, 1, "cmd-r", "Withdrawn"))
	wantFirst("an append with the refused command id", err)
	_, err = e.s.RecordRefusal(e.ctx, ref, "cmd-r", eventstore.Refusal{Status: "conflict", Reason: "other", Version: 7})
	wantFirst("a second refusal", err)
	_, err = e.s.CommandResult(e.ctx, ref, "cmd-r")
	wantFirst("CommandResult", err)
	if after := e.snapshotOf(ref); after != before {
		t.Fatalf("later deliveries of a refused command wrote:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// A refusal after the append gets the append.
	applied := e.mustAppend(e.prepare(ref, 1, "cmd-a", "Deposited"))
	res, err := e.s.RecordRefusal(e.ctx, ref, "cmd-a", eventstore.Refusal{Status: "rejected", Reason: "late", Version: 1})
	if err != nil || !res.Duplicate || res.LastSeq != 2 || fmt.Sprint(res.EventIDs) != fmt.Sprint(applied.EventIDs) {
		t.Fatalf("refusal of an applied command = %+v, %v; want the append (version 2) as a duplicate", res, err)
	}
	if res, err := e.s.CommandResult(e.ctx, ref, "cmd-a"); err != nil || !res.Duplicate || res.LastSeq != 2 {
		t.Fatalf("CommandResult after the late refusal = %+v, %v; want the append", res, err)
	}

	// A refusal of an aggregate that does not exist is recorded, and
	// creates no aggregate.
	ghost := e.ref("ghost")
	if _, err := e.s.RecordRefusal(e.ctx, ghost, "cmd-g", eventstore.Refusal{Status: "not_found", Reason: "no such account"}); err != nil {
		t.Fatalf("refusal on an unknown aggregate: %v", err)
	}
	if _, err := e.s.Version(e.ctx, ghost); !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Fatalf("a refusal created the aggregate: Version %v", err)
	}

	// A long reason is cut as Refusal.Recorded says.
	long := eventstore.Refusal{Status: "rejected", Reason: strings.Repeat("é", eventstore.MaxReasonBytes), Version: 2}
	if _, err := e.s.RecordRefusal(e.ctx, ref, "cmd-long", long); err != nil {
		t.Fatal(err)
	}
	var refused *eventstore.RefusedCommandError
	if _, err := e.s.CommandResult(e.ctx, ref, "cmd-long"); !errors.As(err, &refused) || refused.Refusal != long.Recorded() {
		t.Fatalf("CommandResult of a long refusal: %v; want the reason cut to %d bytes", err, len(long.Recorded().Reason))
	}

	// Bad input records nothing.
	for name, c := range map[string]struct {
		ref eventstore.Ref
		id  string
		r   eventstore.Refusal
	}{
		"reserved character in aggregate id": {eventstore.Ref{Type: ref.Type, ID: "a#1"}, "cmd-b", eventstore.Refusal{Status: "rejected"}},
		"empty command id":                   {ref, "", eventstore.Refusal{Status: "rejected"}},
		"reserved character in command id":   {ref, "cmd#b", eventstore.Refusal{Status: "rejected"}},
		"empty status":                       {ref, "cmd-b", eventstore.Refusal{}},
		"negative version":                   {ref, "cmd-b", eventstore.Refusal{Status: "rejected", Version: -1}},
	} {
		if _, err := e.s.RecordRefusal(e.ctx, c.ref, c.id, c.r); !isValidation(err, "") {
			t.Errorf("%s: %v; want a *ValidationError", name, err)
		}
	}
	if _, err := e.s.CommandResult(e.ctx, ref, "cmd-b"); !errors.Is(err, eventstore.ErrCommandNotFound) {
		t.Fatalf("bad refusals recorded something: %v", err)
	}
}

func testRefusalRacesAppend(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	const commands, racers = 8, 6
	for c := range commands {
		ref := e.ref(fmt.Sprintf("acct%02d", c))
		e.mustAppend(e.prepare(ref, 0, "", "Opened"))
		cmd := fmt.Sprintf("cmd-%02d", c)
		type answer struct {
			wrote    bool // this caller's append or refusal is the record
			appended bool
			dup      *eventstore.AppendResult
			refusal  *eventstore.Refusal
		}
		answers := make([]answer, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for r := range racers {
			req := e.prepare(ref, 1, cmd, "Withdrawn")
			mine := eventstore.Refusal{Status: "rejected", Reason: fmt.Sprintf("racer %d", r), Version: 1}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var res eventstore.AppendResult
				var err error
				if (r+c)%2 == 0 {
					res, err = e.s.Append(e.ctx, req)
					if err == nil && !res.Duplicate {
						answers[r] = answer{wrote: true, appended: true}
						return
					}
				} else {
					res, err = e.s.RecordRefusal(e.ctx, ref, cmd, mine)
					if err == nil && !res.Duplicate {
						answers[r] = answer{wrote: true, refusal: &mine}
						return
					}
				}
				var rc *eventstore.RefusedCommandError
				switch {
				case err == nil:
					answers[r].dup = &res
				case errors.As(err, &rc):
					answers[r].refusal = &rc.Refusal
				default:
					t.Errorf("%s racer %d: %v", cmd, r, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		var winner *answer
		for r := range answers {
			if answers[r].wrote {
				if winner != nil {
					t.Fatalf("%s: two callers wrote the answer: %+v and %+v", cmd, *winner, answers[r])
				}
				winner = &answers[r]
			}
		}
		if winner == nil {
			t.Fatalf("%s: no caller wrote an answer", cmd)
		}
		log := e.load(ref)
		for r, a := range answers {
			switch {
			case winner.appended && len(log) != 2:
				t.Fatalf("%s: the append won but the log holds %d events", cmd, len(log))
			case !winner.appended && len(log) != 1:
				t.Fatalf("%s: a refusal won but the log holds %d events", cmd, len(log))
			case a.wrote:
			case winner.appended && (a.dup == nil || a.dup.LastSeq != 2 || len(a.dup.EventIDs) != 1 || a.dup.EventIDs[0] != log[1].EventID):
				t.Errorf("%s racer %d got %+v; want the append (version 2) as a duplicate", cmd, r, a)
			case !winner.appended && (a.refusal == nil || *a.refusal != *winner.refusal):
				t.Errorf("%s racer %d got %+v; want the recorded refusal %+v", cmd, r, a, *winner.refusal)
			}
		}
	}
}
