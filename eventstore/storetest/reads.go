package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

func testSnapshots(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	ref := e.ref("account")
	e.mustAppend(e.prepare(ref, 0, "", "Opened", "Deposited", "Deposited"))
	want := func(seq int64, data string) {
		t.Helper()
		sn, err := e.s.Snapshot(e.ctx, ref)
		if err != nil || sn.Seq != seq || !sameJSON(sn.Data, []byte(data)) {
			t.Fatalf("Snapshot = %d %s, %v; want %d %s", sn.Seq, sn.Data, err, seq, data)
		}
		if sn.UpdatedAt.IsZero() {
			t.Fatalf("Snapshot has no UpdatedAt")
		}
	}
	put := func(seq int64, data string) error {
		return e.s.PutSnapshot(e.ctx, ref, eventstore.Stored{Seq: seq, Data: json.RawMessage(data)})
	}
	if err := put(2, `{"n":2}`); err != nil {
		t.Fatal(err)
	}
	want(2, `{"n":2}`)
	if err := put(1, `{"n":1}`); err != nil {
		t.Fatalf("an older snapshot: %v; want nil (and nothing written)", err)
	}
	want(2, `{"n":2}`)
	if err := put(2, `{"n":"again"}`); err != nil {
		t.Fatalf("a snapshot at the same sequence: %v; want nil (and nothing written)", err)
	}
	want(2, `{"n":2}`)
	if err := put(4, `{"n":4}`); !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Fatalf("a snapshot beyond the version: %v; want ErrAggregateNotFound", err)
	}
	for name, err := range map[string]error{
		"sequence 0":  put(0, `{}`),
		"broken JSON": put(3, `{`),
		"null":        put(3, `null`),
	} {
		if !isValidation(err, "") {
			t.Errorf("snapshot with %s: %v; want a *ValidationError", name, err)
		}
	}
	if err := put(3, `{"blob":"`+strings.Repeat("x", 401*1024)+`"}`); !errors.Is(err, eventstore.ErrItemTooLarge) {
		t.Errorf("a snapshot over 400 KB: %v; want ErrItemTooLarge", err)
	}
	want(2, `{"n":2}`)
	if err := put(3, `{"n":3}`); err != nil {
		t.Fatal(err)
	}
	want(3, `{"n":3}`)
	if _, err := e.s.State(e.ctx, ref); !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Fatalf("a snapshot wrote STATE: %v", err)
	}
}

// reader returns the subject's TypeReader or skips t.
func (e *env) reader() eventstore.TypeReader {
	e.t.Helper()
	r, ok := e.s.(eventstore.TypeReader)
	if !ok {
		e.t.Skipf("%T is not an eventstore.TypeReader", e.s)
	}
	return r
}

// listAll pages through q with the page size q.Limit and returns every
// event id, checking each page.
func (e *env) listAll(r eventstore.TypeReader, q eventstore.TypeQuery) ([]string, error) {
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			return nil, errors.New("more than 1000 pages")
		}
		p, err := r.ListByType(e.ctx, q)
		if err != nil {
			return nil, err
		}
		if q.Limit > 0 && len(p.Events) > q.Limit {
			return nil, fmt.Errorf("a page of %d events, limit %d", len(p.Events), q.Limit)
		}
		for _, ev := range p.Events {
			if ev.EventType != q.EventType {
				return nil, fmt.Errorf("listing %s returned %s", q.EventType, ev)
			}
			ids = append(ids, ev.EventID)
		}
		if p.Next == "" {
			return ids, nil
		}
		q.Cursor = p.Next
	}
}

func same(got, want []string) error {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("listed %d events %v; want %d %v", len(got), got, len(want), want)
	}
	return nil
}

func testByType(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	r := e.reader()
	listed, other := "Listed_"+e.token, "Other_"+e.token
	var want, wantOther []string
	for i := range 7 {
		ref := e.ref(fmt.Sprintf("agg%d", i%3))
		v, err := e.s.Version(e.ctx, ref)
		if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
			t.Fatal(err)
		}
		types := []string{listed}
		if i%2 == 1 {
			types = []string{other, listed}
		}
		res := e.mustAppend(e.prepare(ref, v, "", types...))
		want = append(want, res.EventIDs[len(res.EventIDs)-1])
		if i%2 == 1 {
			wantOther = append(wantOther, res.EventIDs[0])
		}
	}
	e.eventually("CountByType", func() error {
		for typ, n := range map[string]int{listed: len(want), other: len(wantOther), "Never_" + e.token: 0} {
			got, err := r.CountByType(e.ctx, typ)
			if err != nil {
				return err
			}
			if got != n {
				return fmt.Errorf("%s: %d events, want %d", typ, got, n)
			}
		}
		return nil
	})
	for _, limit := range []int{0, 1, 3, 7, 1000} {
		e.eventually(fmt.Sprintf("pages of %d", limit), func() error {
			got, err := e.listAll(r, eventstore.TypeQuery{EventType: listed, Limit: limit})
			if err != nil {
				return err
			}
			return same(got, want)
		})
	}
	e.eventually("the other type", func() error {
		got, err := e.listAll(r, eventstore.TypeQuery{EventType: other, Limit: 2})
		if err != nil {
			return err
		}
		return same(got, wantOther)
	})
	if got, err := e.listAll(r, eventstore.TypeQuery{EventType: "Never_" + e.token}); err != nil || len(got) != 0 {
		t.Fatalf("a type without events: %v, %v; want none", got, err)
	}
	// After: a checkpoint resumes behind it.
	for _, k := range []int{0, 3, len(want) - 1} {
		got, err := e.listAll(r, eventstore.TypeQuery{EventType: listed, After: want[k], Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := same(got, want[k+1:]); err != nil {
			t.Fatalf("after event %d: %v", k, err)
		}
	}
	// From and To bound the events' ULID time to [From, To).
	mid := ulidTime(t, want[3])
	var fromMid, toMid []string
	for _, id := range want {
		if ulidTime(t, id).Before(mid) {
			toMid = append(toMid, id)
		} else {
			fromMid = append(fromMid, id)
		}
	}
	for name, c := range map[string]struct {
		q    eventstore.TypeQuery
		want []string
	}{
		"from":         {eventstore.TypeQuery{EventType: listed, From: mid, Limit: 2}, fromMid},
		"to":           {eventstore.TypeQuery{EventType: listed, To: mid, Limit: 2}, toMid},
		"from and to":  {eventstore.TypeQuery{EventType: listed, From: mid, To: mid.Add(time.Millisecond), Limit: 2}, sameMilli(t, want, mid)},
		"all of time":  {eventstore.TypeQuery{EventType: listed, From: mid.Add(-time.Hour), To: mid.Add(time.Hour)}, want},
		"in the past":  {eventstore.TypeQuery{EventType: listed, To: mid.Add(-time.Hour)}, nil},
		"after and to": {eventstore.TypeQuery{EventType: listed, After: want[0], To: mid, Limit: 1}, after(toMid, want[0])},
	} {
		got, err := e.listAll(r, c.q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := same(got, c.want); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Bad queries.
	first, err := r.ListByType(e.ctx, eventstore.TypeQuery{EventType: listed, Limit: 1})
	if err != nil || first.Next == "" {
		t.Fatalf("first page of 1: %+v, %v; want a cursor", first, err)
	}
	for name, c := range map[string]struct {
		q     eventstore.TypeQuery
		field string
	}{
		"a cursor of another type": {eventstore.TypeQuery{EventType: other, Cursor: first.Next}, "cursor"},
		"a malformed cursor":       {eventstore.TypeQuery{EventType: listed, Cursor: "not a cursor!"}, "cursor"},
		"a limit above 1000":       {eventstore.TypeQuery{EventType: listed, Limit: 1001}, "limit"},
		"a negative limit":         {eventstore.TypeQuery{EventType: listed, Limit: -1}, "limit"},
		"to before from":           {eventstore.TypeQuery{EventType: listed, From: mid, To: mid.Add(-time.Second)}, "to"},
		"after not an event id":    {eventstore.TypeQuery{EventType: listed, After: "evt-1"}, "after"},
		"no event type":            {eventstore.TypeQuery{}, "event_type"},
	} {
		if _, err := r.ListByType(e.ctx, c.q); !isValidation(err, c.field) {
			t.Errorf("%s: %v; want a *ValidationError on %s", name, err, c.field)
		}
	}
	if _, err := r.CountByType(e.ctx, "bad#type"); !isValidation(err, "event_type") {
		t.Errorf("CountByType of a bad type: %v; want a *ValidationError", err)
	}
}

// crockford is the base-32 alphabet of ULIDs.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidTime returns the millisecond an event id (a ULID) was made in: its
// first 10 characters, 48 bits.
func ulidTime(t *testing.T, id string) time.Time {
	t.Helper()
	if len(id) != 26 {
		t.Fatalf("event id %q is not a ULID", id)
	}
	var ms int64
	for _, c := range id[:10] {
		i := strings.IndexRune(crockford, c)
		if i < 0 {
			t.Fatalf("event id %q is not a ULID", id)
		}
		ms = ms<<5 | int64(i)
	}
	return time.UnixMilli(ms)
}

// sameMilli returns the ids whose ULID time is t's millisecond.
func sameMilli(tt *testing.T, ids []string, t time.Time) []string {
	var out []string
	for _, id := range ids {
		if ulidTime(tt, id).Equal(t) {
			out = append(out, id)
		}
	}
	return out
}

// after returns the ids above id.
func after(ids []string, id string) []string {
	var out []string
	for _, x := range ids {
		if x > id {
			out = append(out, x)
		}
	}
	return out
}

func testUpcasting(t *testing.T, open Opener) {
	tok := token(t)
	registered, broken := "Registered_"+tok, "Broken_"+tok
	ups := &eventstore.Upcasters{}
	ups.MustRegister(registered, 1, func(p json.RawMessage) (json.RawMessage, error) {
		var v1 struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(p, &v1); err != nil {
			return nil, err
		}
		first, last, _ := strings.Cut(v1.Name, " ")
		return json.Marshal(map[string]string{"first": first, "last": last})
	})
	ups.MustRegister(registered, 2, func(p json.RawMessage) (json.RawMessage, error) {
		var v2 map[string]any
		if err := json.Unmarshal(p, &v2); err != nil {
			return nil, err
		}
		v2["tier"] = "basic"
		return json.Marshal(v2)
	})
	ups.MustRegister(broken, 1, func(json.RawMessage) (json.RawMessage, error) {
		return nil, errors.New("cannot upgrade")
	})
	e := setup(t, open, eventstore.Schema{Upcasters: ups})
	e.token = tok
	ref := e.ref("customer")
	req, err := eventstore.Prepare(ref, 0, eventstore.Change{Events: []eventstore.NewEvent{
		{Type: registered, SchemaVersion: 1, Payload: json.RawMessage(`{"name":"John Brown"}`)},
		{Type: registered, SchemaVersion: 2, Payload: json.RawMessage(`{"first":"Ann","last":"Lee"}`)},
		eventstore.Event(registered, map[string]string{"first": "Bo", "last": "Ek", "tier": "gold"}),
	}}, e.schema)
	if err != nil {
		t.Fatal(err)
	}
	if v := req.Events[2].SchemaVersion; v != 3 {
		t.Fatalf("a new event is prepared at v%d, want the current v3", v)
	}
	e.mustAppend(req)
	wantPayloads := []string{
		`{"first":"John","last":"Brown","tier":"basic"}`,
		`{"first":"Ann","last":"Lee","tier":"basic"}`,
		`{"first":"Bo","last":"Ek","tier":"gold"}`,
	}
	check := func(where string, evs []eventstore.Envelope) error {
		if len(evs) != len(wantPayloads) {
			return fmt.Errorf("%s: %d events, want %d", where, len(evs), len(wantPayloads))
		}
		for i, ev := range evs {
			if ev.SchemaVersion != 3 || !sameJSON(ev.Payload, []byte(wantPayloads[i])) {
				return fmt.Errorf("%s: event %d is v%d %s, want v3 %s", where, i, ev.SchemaVersion, ev.Payload, wantPayloads[i])
			}
		}
		return nil
	}
	if err := check("Load", e.load(ref)); err != nil {
		t.Fatal(err)
	}
	// Reading twice upcasts the stored event again, not the first read's.
	if err := check("Load again", e.load(ref)); err != nil {
		t.Fatal(err)
	}
	if pl, ok := e.s.(PageLoader); ok {
		evs, err := pl.LoadPage(e.ctx, ref, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if err := check("LoadPage", evs); err != nil {
			t.Fatal(err)
		}
	}
	if r, ok := e.s.(eventstore.TypeReader); ok {
		e.eventually("ListByType", func() error {
			p, err := r.ListByType(e.ctx, eventstore.TypeQuery{EventType: registered})
			if err != nil {
				return err
			}
			return check("ListByType", p.Events)
		})
	}
	bad := e.ref("broken")
	old, err := eventstore.Prepare(bad, 0, eventstore.Change{Events: []eventstore.NewEvent{
		{Type: broken, SchemaVersion: 1, Payload: json.RawMessage(`{}`)},
	}}, e.schema)
	if err != nil {
		t.Fatal(err)
	}
	e.mustAppend(old)
	if evs, err := e.s.Load(e.ctx, bad, 0); err == nil || errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Fatalf("Load of an event whose upcaster fails = %d events, %v; want the upcaster's error", len(evs), err)
	}
}

func testLoadPageAndListAggregates(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	pl, pages := e.s.(PageLoader)
	al, lists := e.s.(eventstore.AggregateLister)
	if !pages && !lists {
		t.Skipf("%T has neither LoadPage nor ListAggregates", e.s)
	}
	if pages {
		ref := e.ref("paged")
		for v := int64(0); v < 7; v++ {
			e.mustAppend(e.prepare(ref, v, "", "Happened"))
		}
		var seqs []int64
		for after := int64(0); ; {
			page, err := pl.LoadPage(e.ctx, ref, after, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 3 {
				t.Fatalf("a page of %d events, limit 3", len(page))
			}
			for _, ev := range page {
				seqs = append(seqs, ev.Sequence)
			}
			if len(page) < 3 {
				break
			}
			after = page[len(page)-1].Sequence
		}
		if fmt.Sprint(seqs) != "[1 2 3 4 5 6 7]" {
			t.Fatalf("pages gave %v", seqs)
		}
		if all, err := pl.LoadPage(e.ctx, ref, 0, 0); err != nil || len(all) != 7 {
			t.Fatalf("LoadPage with the default limit: %d events, %v", len(all), err)
		}
		if _, err := pl.LoadPage(e.ctx, e.ref("nobody"), 0, 3); !errors.Is(err, eventstore.ErrAggregateNotFound) {
			t.Fatalf("LoadPage of an unknown aggregate: %v; want ErrAggregateNotFound", err)
		}
	}
	if lists {
		typ := "lister-" + e.token
		for _, id := range []string{"c", "a", "b"} {
			e.mustAppend(e.prepare(eventstore.Ref{Type: typ, ID: id}, 0, "", "Happened"))
		}
		if _, err := e.s.RecordRefusal(e.ctx, eventstore.Ref{Type: typ, ID: "refused-only"}, "cmd-1", eventstore.Refusal{Status: "rejected"}); err != nil {
			t.Fatal(err)
		}
		e.eventually("ListAggregates", func() error {
			for after, want := range map[string]string{"": "[a b c]", "a": "[b c]", "c": "[]"} {
				var ids []string
				for q := (eventstore.AggregateQuery{Type: typ, After: after, Limit: 2}); ; {
					page, err := al.ListAggregates(e.ctx, q)
					if err != nil {
						return err
					}
					if len(page.IDs) > 2 {
						return fmt.Errorf("a page of %d ids, limit 2", len(page.IDs))
					}
					ids = append(ids, page.IDs...)
					if !page.More {
						break
					}
					if len(page.IDs) > 0 {
						q.After = page.IDs[len(page.IDs)-1]
					}
				}
				if fmt.Sprint(ids) != want {
					return fmt.Errorf("after %q: %v, want %s", after, ids, want)
				}
			}
			return nil
		})
		for _, q := range []eventstore.AggregateQuery{{}, {Type: "a#b"}, {Type: typ, After: "x#y"}, {Type: typ, Limit: -1}, {Type: typ, Limit: eventstore.MaxPageSize + 1}} {
			if _, err := al.ListAggregates(e.ctx, q); !isValidation(err, "") {
				t.Errorf("ListAggregates(%+v): %v; want *ValidationError", q, err)
			}
		}
	}
}
