package dynamodb_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// TestARecordedRefusalIsTheAnswerEveryLaterDeliveryGets records a refusal
// for a command id, then tries what a redelivery decided afresh would do:
// an append with the same command id (the state now allows it) and a
// different refusal. Both get the first refusal back and write nothing.
func TestARecordedRefusalIsTheAnswerEveryLaterDeliveryGets(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, func(c *store.Config) { c.CommandRetention = time.Hour })
	ref := eventstore.Ref{Type: "account", ID: "a1"}
	appendEvents(t, s, ref, 0, "Opened")
	first := eventstore.Refusal{Status: "rejected", Reason: "insufficient funds", Version: 1}

	if res, err := s.RecordRefusal(ctx, ref, "01JCMD", first); err != nil || res.Duplicate {
		t.Fatalf("RecordRefusal = %+v, %v; want it recorded", res, err)
	}
	before := dumpTable(t, client, table)

	wantFirst := func(what string, err error) {
		t.Helper()
		var refused *eventstore.RefusedCommandError
		if !errors.As(err, &refused) || refused.Refusal != first || refused.CommandID != "01JCMD" || refused.Aggregate != ref {
			t.Fatalf("%s: %v; want the recorded refusal %+v", what, err, first)
		}
	}
	req, err := eventstore.Prepare(ref, 1, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Withdrawn", map[string]int{"amount": 5})}, CommandID: "01JCMD"}, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Append(ctx, req)
	wantFirst("append with the refused command id", err)
	_, err = s.RecordRefusal(ctx, ref, "01JCMD", eventstore.Refusal{Status: "not_found", Reason: "other", Version: 7})
	wantFirst("a second refusal", err)
	_, err = s.CommandResult(ctx, ref, "01JCMD")
	wantFirst("CommandResult", err)
	if got := dumpTable(t, client, table); got != before {
		t.Fatalf("a later delivery changed the table:\n%s\nwant\n%s", got, before)
	}
	if v, err := s.Version(ctx, ref); err != nil || v != 1 {
		t.Fatalf("version %d, %v; want 1", v, err)
	}
	found := false
	for _, r := range dumpPartition(t, client, table, ref) {
		if strings.Contains(r, `sk=S"COMMAND#01JCMD"`) && strings.Contains(r, `status=S"rejected"`) &&
			strings.Contains(r, `reason=S"insufficient funds"`) && strings.Contains(r, `lastSeq=N1;`) && strings.Contains(r, `ttl=N`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no refusal record (status, reason, version, ttl) in the partition:\n%s", before)
	}
}

// TestARefusalAfterAnAppendReturnsTheAppend: a delivery that decides to
// refuse a command another delivery already applied gets the append's
// result (Duplicate) and records nothing.
func TestARefusalAfterAnAppendReturnsTheAppend(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, nil)
	ref := eventstore.Ref{Type: "account", ID: "a1"}
	req, err := eventstore.Prepare(ref, 0, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Opened", map[string]int{})}, CommandID: "01JCMD"}, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	applied, err := s.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	before := dumpTable(t, client, table)
	res, err := s.RecordRefusal(ctx, ref, "01JCMD", eventstore.Refusal{Status: "conflict", Reason: "exists", Version: 1})
	if err != nil || !res.Duplicate || res.LastSeq != 1 || len(res.EventIDs) != 1 || res.EventIDs[0] != applied.EventIDs[0] {
		t.Fatalf("RecordRefusal = %+v, %v; want the append's result %+v as a duplicate", res, err, applied)
	}
	if got := dumpTable(t, client, table); got != before {
		t.Fatal("the refusal changed the table")
	}
}

// TestRecordRefusalRejectsBadInputAndWritesNothing: unusable keys or an
// empty status are *eventstore.ValidationError before any write.
func TestRecordRefusalRejectsBadInputAndWritesNothing(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, nil)
	ok := eventstore.Ref{Type: "account", ID: "a1"}
	for name, c := range map[string]struct {
		ref eventstore.Ref
		id  string
		r   eventstore.Refusal
	}{
		"reserved char in id":      {eventstore.Ref{Type: "account", ID: "a#1"}, "01JCMD", eventstore.Refusal{Status: "rejected"}},
		"empty aggregate type":     {eventstore.Ref{ID: "a1"}, "01JCMD", eventstore.Refusal{Status: "rejected"}},
		"reserved char in command": {ok, "01J#CMD", eventstore.Refusal{Status: "rejected"}},
		"empty command id":         {ok, "", eventstore.Refusal{Status: "rejected"}},
		"empty status":             {ok, "01JCMD", eventstore.Refusal{}},
		"negative version":         {ok, "01JCMD", eventstore.Refusal{Status: "rejected", Version: -1}},
	} {
		_, err := s.RecordRefusal(ctx, c.ref, c.id, c.r)
		var invalid *eventstore.ValidationError
		if !errors.As(err, &invalid) {
			t.Errorf("%s: %v; want a *ValidationError", name, err)
		}
	}
	if got := dumpTable(t, client, table); got != "" {
		t.Fatalf("bad input wrote items:\n%s", got)
	}
}

// TestConcurrentAppendsAndRefusalsOfOneCommandRecordOneAnswer races, for
// each of many command ids, goroutines that append with the id against
// goroutines that record a refusal for it (as two deliveries on two
// processes that decided differently would). Every caller ends up with
// the same answer: either the command appended exactly once and every
// refusal got that append back, or no event exists and every append got
// the one recorded refusal back.
func TestConcurrentAppendsAndRefusalsOfOneCommandRecordOneAnswer(t *testing.T) {
	ctx := ctxT(t)
	s, _, _ := newStore(t, nil)
	const commands, racers = 16, 6
	accepted, refused := 0, 0
	for c := range commands {
		ref := eventstore.Ref{Type: "account", ID: fmt.Sprintf("a%02d", c)}
		appendEvents(t, s, ref, 0, "Opened")
		cmdID := fmt.Sprintf("01JCMD%02d", c)
		type answer struct {
			appended bool // this caller wrote the events
			dup      *eventstore.AppendResult
			refusal  *eventstore.Refusal
			mine     bool // this caller's refusal was recorded
		}
		answers := make([]answer, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				appender := r%2 == 0
				if appender == (c%2 == 0) {
					// Give the other kind a head start of 0-400 ms, so
					// both kinds win some commands and some are near ties
					// (under concurrent load DynamoDB Local answers a
					// PutItem hundreds of milliseconds later than a
					// transaction started at the same time).
					time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
				}
				var res eventstore.AppendResult
				var err error
				if appender {
					req, perr := eventstore.Prepare(ref, 1, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Withdrawn", map[string]int{"racer": r})}, CommandID: cmdID}, s.Schema())
					if perr != nil {
						t.Error(perr)
						return
					}
					res, err = s.Append(ctx, req)
					if err == nil && !res.Duplicate {
						answers[r].appended = true
						return
					}
				} else {
					res, err = s.RecordRefusal(ctx, ref, cmdID, eventstore.Refusal{Status: "rejected", Reason: fmt.Sprintf("racer %d", r), Version: 1})
					if err == nil && !res.Duplicate {
						answers[r].mine = true
						answers[r].refusal = &eventstore.Refusal{Status: "rejected", Reason: fmt.Sprintf("racer %d", r), Version: 1}
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
					t.Errorf("%s racer %d: %v", cmdID, r, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		evs, err := s.Load(ctx, ref, 0)
		if err != nil {
			t.Fatal(err)
		}
		writers, recorders := 0, 0
		var recorded *eventstore.Refusal
		for _, a := range answers {
			if a.appended {
				writers++
			}
			if a.mine {
				recorders++
				recorded = a.refusal
			}
		}
		switch {
		case writers == 1 && recorders == 0:
			accepted++
			if len(evs) != 2 {
				t.Errorf("%s: appended, but the log holds %d events", cmdID, len(evs))
			}
			for r, a := range answers {
				if !a.appended && (a.dup == nil || a.dup.LastSeq != 2) {
					t.Errorf("%s racer %d: answer %+v; want the append (version 2) as a duplicate", cmdID, r, a)
				}
			}
		case writers == 0 && recorders == 1:
			refused++
			if len(evs) != 1 {
				t.Errorf("%s: refused, but the log holds %d events", cmdID, len(evs))
			}
			for r, a := range answers {
				if a.refusal == nil || *a.refusal != *recorded {
					t.Errorf("%s racer %d: answer %+v; want the recorded refusal %+v", cmdID, r, a, *recorded)
				}
			}
		default:
			t.Errorf("%s: %d appends and %d refusals recorded; want exactly one answer", cmdID, writers, recorders)
		}
	}
	t.Logf("%d commands: %d won by an append, %d by a refusal", commands, accepted, refused)
}
