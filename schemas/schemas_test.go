package schemas_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/schemas"
)

type address struct {
	City string `json:"city"`
	Zip  string `json:"zip,omitempty"`
}

type Base struct {
	ID   string `json:"id"`
	Note string `json:"note"`
}

type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children"`
}

type everything struct {
	Base                       // promoted: id, note
	Note    int                `json:"note"` // wins over Base's note
	Name    string             `json:"name,omitempty"`
	Count   int64              `json:"count,string"`
	Ratio   float64            `json:"ratio"`
	On      bool               `json:"on"`
	At      time.Time          `json:"at"`
	Raw     json.RawMessage    `json:"raw"`
	Bytes   []byte             `json:"bytes"`
	Any     any                `json:"any"`
	Home    *address           `json:"home"`
	Tags    []string           `json:"tags"`
	Scores  map[string]float64 `json:"scores"`
	Tree    node               `json:"tree"`
	Skipped string             `json:"-"`
	NoTag   string
	//lint:ignore U1000 an unexported field, which JSON (and the shape) leaves out
	internal string
}

func shape(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(schemas.ShapeOf(reflect.TypeOf(v)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestShapeOfFollowsEncodingJSON: the shape of a struct is what
// encoding/json writes: tag names, promoted fields (the nearer one
// winning), ",string", time as a string, RawMessage and interfaces as
// any, []byte as a string, pointers as their target, maps by their
// values, a recursive type as any where it recurs; "-" and unexported
// fields left out.
func TestShapeOfFollowsEncodingJSON(t *testing.T) {
	got := shape(t, everything{})
	want := `{"kind":"object","fields":[` +
		`{"name":"NoTag","kind":"string"},` +
		`{"name":"any","kind":"any"},` +
		`{"name":"at","kind":"string"},` +
		`{"name":"bytes","kind":"string"},` +
		`{"name":"count","kind":"string"},` +
		`{"name":"home","kind":"object","fields":[{"name":"city","kind":"string"},{"name":"zip","kind":"string"}]},` +
		`{"name":"id","kind":"string"},` +
		`{"name":"name","kind":"string"},` +
		`{"name":"note","kind":"integer"},` +
		`{"name":"on","kind":"boolean"},` +
		`{"name":"ratio","kind":"number"},` +
		`{"name":"raw","kind":"any"},` +
		`{"name":"scores","kind":"object","values":{"kind":"number"}},` +
		`{"name":"tags","kind":"array","items":{"kind":"string"}},` +
		`{"name":"tree","kind":"object","fields":[{"name":"children","kind":"array","items":{"kind":"any"}},{"name":"name","kind":"string"}]}` +
		`]}`
	if got != want {
		t.Fatalf("shape\n got %s\nwant %s", got, want)
	}
	if got := shape(t, struct{}{}); got != `{"kind":"object"}` {
		t.Fatalf("empty struct: %s", got)
	}
}

// Two versions of one payload, for the checks below.
type placedV1 struct {
	Customer string  `json:"customer"`
	Total    int64   `json:"total"`
	Ship     address `json:"ship"`
}

type placedV1Added struct {
	Customer string  `json:"customer"`
	Total    int64   `json:"total"`
	Ship     address `json:"ship"`
	Coupon   string  `json:"coupon"`
}

type placedV1Removed struct {
	Total int64   `json:"total"`
	Ship  address `json:"ship"`
}

type placedV1Retyped struct {
	Customer int64   `json:"customer"`
	Total    float64 `json:"total"` // a number reads the stored integers
	Ship     address `json:"ship"`
}

type placedV1NestedRemoved struct {
	Customer string `json:"customer"`
	Total    int64  `json:"total"`
	Ship     struct {
		Zip string `json:"zip"`
	} `json:"ship"`
}

// domain returns a one-aggregate domain recording event type typ with
// payload P (and Cancelled, with an empty payload).
func domain[P any](typ string) commands.Domain {
	ev := eventstore.DefineEvent[P](typ)
	cancelled := eventstore.DefineEvent[struct{}]("Cancelled")
	keep := func(s int, _ P, _ *eventstore.Outbox) (int, error) { return s, nil }
	p := eventstore.NewProcessor(func() int { return 0 }, eventstore.OnEvent(ev, keep),
		eventstore.OnEvent(cancelled, func(s int, _ struct{}, _ *eventstore.Outbox) (int, error) { return s, nil }))
	return commands.FacetDomain("shop", p, commands.OnCommand(commands.DefineCommand[P]("Place"),
		func(eventstore.State[int], commands.Command, P) ([]eventstore.NewEvent, error) { return nil, nil }))
}

func registry(t *testing.T, d commands.Domain, u *eventstore.Upcasters) schemas.Registry {
	t.Helper()
	r, err := schemas.FromDomains([]commands.Domain{d}, u)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// upcastTo2 registers Placed's v1→v2 upcaster.
func upcastTo2() *eventstore.Upcasters {
	u := &eventstore.Upcasters{}
	u.MustRegister("Placed", 1, func(p json.RawMessage) (json.RawMessage, error) { return p, nil })
	return u
}

// TestCheckRefusesWhatStoredEventsWouldNotSurvive compares a snapshot
// taken at placedV1 with each change of the code: removing, retyping or
// renaming breaks, naming the type, the version and the field; adding a
// field or a type, widening an integer to a number, or bumping the
// version with an upcaster passes (the first two noted as out of date).
func TestCheckRefusesWhatStoredEventsWouldNotSurvive(t *testing.T) {
	snapshot := registry(t, domain[placedV1]("Placed"), nil)
	for _, tc := range []struct {
		name   string
		code   schemas.Registry
		breaks []string
		notes  []string
	}{
		{"unchanged", snapshot, nil, nil},
		{"a field added", registry(t, domain[placedV1Added]("Placed"), nil), nil, []string{"Placed v1: field coupon was added"}},
		{"a field removed", registry(t, domain[placedV1Removed]("Placed"), nil), []string{"Placed v1: field customer was removed"}, nil},
		{"a nested field removed", registry(t, domain[placedV1NestedRemoved]("Placed"), nil), []string{"Placed v1: field ship.city was removed"}, nil},
		{"a field retyped", registry(t, domain[placedV1Retyped]("Placed"), nil), []string{"Placed v1: field customer changed its JSON kind from string to integer"}, nil},
		{"the type renamed", registry(t, domain[placedV1]("OrderPlaced"), nil),
			[]string{"Placed v1: is gone from the code (removed or renamed): stored events of it could not be read"},
			[]string{"OrderPlaced v1 (shop): a new event type"}},
		{"a field removed with an upcaster to v2", registry(t, domain[placedV1Removed]("Placed"), upcastTo2()), nil,
			[]string{"Placed: v1 → v2 through upcasters; the snapshot has v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := schemas.Check(snapshot, tc.code)
			var breaks []string
			for _, b := range r.Breaks {
				breaks = append(breaks, b.String())
			}
			if !reflect.DeepEqual(breaks, tc.breaks) || !reflect.DeepEqual(r.Notes, tc.notes) {
				t.Fatalf("breaks %q, notes %q;\nwant breaks %q, notes %q", breaks, r.Notes, tc.breaks, tc.notes)
			}
			var be *schemas.BreakingError
			if (len(tc.breaks) > 0) != errors.As(r.Err(), &be) {
				t.Fatalf("Err = %v with %d breaks", r.Err(), len(tc.breaks))
			}
			if be != nil && (be.Breaks[0].Type != "Placed" || be.Breaks[0].Version != 1 || !strings.Contains(be.Error(), tc.breaks[0])) {
				t.Fatalf("error %q, breaks %+v", be, be.Breaks)
			}
		})
	}

	// Down again from v2: the upcaster was removed.
	v2 := registry(t, domain[placedV1Removed]("Placed"), upcastTo2())
	r := schemas.Check(v2, registry(t, domain[placedV1Removed]("Placed"), nil))
	if len(r.Breaks) != 1 || r.Breaks[0].String() != "Placed v2: is at v1 in the code: its version went down (an upcaster was removed)" {
		t.Fatalf("version down: %+v", r.Breaks)
	}
}

// TestFromDomainsRefusesAnUpcasterGapAndASharedEventType.
func TestFromDomainsRefusesAnUpcasterGapAndASharedEventType(t *testing.T) {
	u := &eventstore.Upcasters{}
	u.MustRegister("Placed", 2, func(p json.RawMessage) (json.RawMessage, error) { return p, nil })
	var ve *eventstore.ValidationError
	if _, err := schemas.FromDomains([]commands.Domain{domain[placedV1]("Placed")}, u); !errors.As(err, &ve) || ve.Field != "upcasters" {
		t.Fatalf("a chain from v2 without v1→v2: %v", err)
	}
	other := domain[placedV1]("Placed")
	other.AggregateType = "market"
	if _, err := schemas.FromDomains([]commands.Domain{domain[placedV1]("Placed"), other}, nil); !errors.As(err, &ve) || ve.Field != "event_type" {
		t.Fatalf("Placed of two domains: %v", err)
	}
}

// TestASnapshotSurvivesItsFile: Marshal then Parse gives the registry
// back; Parse refuses unknown fields and a type listed twice.
func TestASnapshotSurvivesItsFile(t *testing.T) {
	r := registry(t, domain[placedV1]("Placed"), upcastTo2())
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := schemas.Parse(b)
	if err != nil || !back.Equal(r) || len(schemas.Check(back, r).Notes) != 0 {
		t.Fatalf("round trip: %v\n%s", err, b)
	}
	for name, data := range map[string]string{
		"unknown field": `{"events":[],"extra":1}`,
		"twice":         `{"events":[{"type":"A","aggregate":"x","version":1,"payload":null},{"type":"A","aggregate":"x","version":1,"payload":null}]}`,
		"version 0":     `{"events":[{"type":"A","aggregate":"x","version":0,"payload":null}]}`,
	} {
		if _, err := schemas.Parse([]byte(data)); !errors.Is(err, eventstore.ErrMalformed) {
			t.Errorf("%s: %v, want a DecodeError", name, err)
		}
	}
}
