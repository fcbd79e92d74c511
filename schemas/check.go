package schemas

import (
	"fmt"
	"strings"
)

// Break is one change that stored events would not survive: an event
// type of the snapshot at Version that the code no longer has, or whose
// payload lost a field or changed its JSON kind at Field (a path such as
// "address.city"; "" for the whole type or payload) without a new
// schema version.
type Break struct {
	Type    string
	Version int
	Field   string
	Reason  string
}

func (b Break) String() string {
	if b.Field == "" {
		return fmt.Sprintf("%s v%d: %s", b.Type, b.Version, b.Reason)
	}
	return fmt.Sprintf("%s v%d: field %s %s", b.Type, b.Version, b.Field, b.Reason)
}

// Report is what Check found: the breaking changes, and the changes that
// break nothing but are not in the snapshot yet (a new event type or
// field, a version bumped with an upcaster), which writing the snapshot
// again records.
type Report struct {
	Breaks []Break
	Notes  []string
}

// Stale reports whether the snapshot differs from the code in ways that
// break nothing (Notes): it should be written again.
func (r Report) Stale() bool { return len(r.Notes) > 0 }

// Err returns nil when nothing breaks, and otherwise a *BreakingError
// listing every break.
func (r Report) Err() error {
	if len(r.Breaks) == 0 {
		return nil
	}
	return &BreakingError{Breaks: r.Breaks}
}

// BreakingError says the code's event schemas break events stored under
// the snapshot's: each Break names the type, the version and the field.
type BreakingError struct {
	Breaks []Break
}

func (e *BreakingError) Error() string {
	lines := make([]string, len(e.Breaks))
	for i, b := range e.Breaks {
		lines[i] = "  " + b.String()
	}
	return fmt.Sprintf("%d breaking event schema change(s); keep the old shape, or bump the type's version with an upcaster, then write the snapshot again:\n%s",
		len(e.Breaks), strings.Join(lines, "\n"))
}

// Permanent marks the error permanent for eventstore.IsPermanent: the
// same code breaks the same way.
func (e *BreakingError) Permanent() bool { return true }

// Check compares current, the code's schemas, with committed, the
// snapshot. For each event type of the snapshot:
//
//   - gone from the code (removed, or renamed: an upcaster cannot rename
//     a type): a break;
//   - at a lower version than the snapshot's: a break (an upcaster was
//     removed);
//   - at a higher version: allowed, whatever its shape (the upcasters
//     turn every stored event into it, and Upcasters.Validate has checked
//     the chain): a note that the snapshot is out of date;
//   - at the same version: every field of the snapshot's payload, nested,
//     must still be there with a JSON kind that reads the old one (the
//     same, an integer read as a number, anything read as any); a field
//     removed or retyped is a break, a field added a note.
//
// A type in the code and not in the snapshot is a note. A payload whose
// shape is unknown on either side (no typed definition) is not compared.
func Check(committed, current Registry) Report {
	var r Report
	for _, old := range committed.Events {
		cur, ok := current.event(old.Type)
		switch {
		case !ok:
			r.Breaks = append(r.Breaks, Break{Type: old.Type, Version: old.Version,
				Reason: "is gone from the code (removed or renamed): stored events of it could not be read"})
		case cur.Version < old.Version:
			r.Breaks = append(r.Breaks, Break{Type: old.Type, Version: old.Version,
				Reason: fmt.Sprintf("is at v%d in the code: its version went down (an upcaster was removed)", cur.Version)})
		case cur.Version > old.Version:
			r.Notes = append(r.Notes, fmt.Sprintf("%s: v%d → v%d through upcasters; the snapshot has v%d", old.Type, old.Version, cur.Version, old.Version))
		case cur.Aggregate != old.Aggregate:
			r.Breaks = append(r.Breaks, Break{Type: old.Type, Version: old.Version,
				Reason: fmt.Sprintf("moved from aggregate %s to %s", old.Aggregate, cur.Aggregate)})
		case old.Payload != nil && cur.Payload != nil:
			compare(&r, old, "", *old.Payload, *cur.Payload)
		case old.Payload == nil && cur.Payload != nil:
			r.Notes = append(r.Notes, fmt.Sprintf("%s v%d: its payload now has a typed definition", old.Type, old.Version))
		}
	}
	for _, cur := range current.Events {
		if _, ok := committed.event(cur.Type); !ok {
			r.Notes = append(r.Notes, fmt.Sprintf("%s v%d (%s): a new event type", cur.Type, cur.Version, cur.Aggregate))
		}
	}
	return r
}

// compare adds to r what changed from old to cur at path in event e.
func compare(r *Report, e Event, path string, old, cur Shape) {
	at := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	if !cur.Kind.accepts(old.Kind) {
		r.Breaks = append(r.Breaks, Break{Type: e.Type, Version: e.Version, Field: path,
			Reason: fmt.Sprintf("changed its JSON kind from %s to %s", old.Kind, cur.Kind)})
		return
	}
	if cur.Kind == KindAny {
		return
	}
	for _, of := range old.Fields {
		cf, ok := cur.field(of.Name)
		if !ok && cur.Values != nil { // a map reads every field
			compare(r, e, at(of.Name), of.Shape, *cur.Values)
			continue
		}
		if !ok {
			r.Breaks = append(r.Breaks, Break{Type: e.Type, Version: e.Version, Field: at(of.Name), Reason: "was removed"})
			continue
		}
		compare(r, e, at(of.Name), of.Shape, cf.Shape)
	}
	for _, cf := range cur.Fields {
		if _, ok := old.field(cf.Name); !ok {
			r.Notes = append(r.Notes, fmt.Sprintf("%s v%d: field %s was added", e.Type, e.Version, at(cf.Name)))
		}
	}
	if old.Values != nil && cur.Values != nil {
		compare(r, e, at("*"), *old.Values, *cur.Values)
	}
	if old.Items != nil && cur.Items != nil {
		compare(r, e, path+"[]", *old.Items, *cur.Items)
	}
}
