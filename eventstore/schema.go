package eventstore

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// UpcastFunc turns the payload of one schema version of an event type into
// the payload of the next version. It must be pure; it sees a copy.
type UpcastFunc func(payload json.RawMessage) (json.RawMessage, error)

type upcastKey struct {
	eventType string
	from      int
}

// Upcasters is a registry of UpcastFuncs keyed by (event type, from
// version); each produces version from+1. Upcast applies them in a chain
// until no upcaster matches, so stored events are never rewritten: they
// are upgraded on every read. The zero value is empty and ready; a nil
// *Upcasters upcasts nothing. Safe for concurrent use.
type Upcasters struct {
	mu      sync.RWMutex
	fns     map[upcastKey]UpcastFunc
	current map[string]int
}

// Register adds the upcaster from version `from` to from+1 of eventType.
// It returns a *ValidationError for a bad event type, a version below 1 or
// a second upcaster for the same (type, version).
func (u *Upcasters) Register(eventType string, from int, fn UpcastFunc) error {
	if err := ValidateName("event_type", eventType); err != nil {
		return err
	}
	if from < 1 {
		return &ValidationError{Field: "from_version", Reason: fmt.Sprintf("is %d, want ≥ 1", from)}
	}
	if fn == nil {
		return &ValidationError{Field: "upcaster", Reason: "is nil"}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fns == nil {
		u.fns = map[upcastKey]UpcastFunc{}
		u.current = map[string]int{}
	}
	k := upcastKey{eventType, from}
	if _, dup := u.fns[k]; dup {
		return &ValidationError{Field: "upcaster", Reason: fmt.Sprintf("%s v%d→v%d is already registered", eventType, from, from+1)}
	}
	u.fns[k] = fn
	if from+1 > u.current[eventType] {
		u.current[eventType] = from + 1
	}
	return nil
}

// MustRegister is Register that panics on error, for package-level setup.
func (u *Upcasters) MustRegister(eventType string, from int, fn UpcastFunc) *Upcasters {
	if err := u.Register(eventType, from, fn); err != nil {
		panic(err)
	}
	return u
}

// Validate checks every event type's chain of upcasters: each version
// from 1 to the type's current one must have its upcaster to the next
// (a stored event of a version without one would stay at that version,
// and its readers would see an old payload under the current rules). A
// gap is a *ValidationError of field "upcasters" naming the type and the
// missing step. Nothing to check on nil. (A chain cannot loop: every
// upcaster goes from one version to the next.)
func (u *Upcasters) Validate() error {
	if u == nil {
		return nil
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	types := make([]string, 0, len(u.current))
	for t := range u.current {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		var have []string
		missing := 0
		for v := 1; v < u.current[t]; v++ {
			if _, ok := u.fns[upcastKey{t, v}]; ok {
				have = append(have, fmt.Sprintf("v%d→v%d", v, v+1))
			} else if missing == 0 {
				missing = v
			}
		}
		if missing > 0 {
			return &ValidationError{Field: "upcasters", Reason: fmt.Sprintf("event type %s has no upcaster from v%d to v%d (it has %s): a stored v%d event would never reach v%d",
				t, missing, missing+1, strings.Join(have, ", "), missing, u.current[t])}
		}
	}
	return nil
}

// Current returns the newest schema version of eventType: one above the
// highest registered upcaster, or 1 when it has none (also on nil).
func (u *Upcasters) Current(eventType string) int {
	if u == nil {
		return 1
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	if v := u.current[eventType]; v > 0 {
		return v
	}
	return 1
}

// Upcast returns e with its payload upgraded version by version until no
// upcaster matches (normally the current version). An upcaster's error or
// an output that is not JSON fails the whole read, wrapped with the event
// and the failing step. e itself is not modified.
func (u *Upcasters) Upcast(e Envelope) (Envelope, error) {
	if u == nil {
		return e, nil
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	for {
		fn, ok := u.fns[upcastKey{e.EventType, e.SchemaVersion}]
		if !ok {
			return e, nil
		}
		in := append(json.RawMessage(nil), e.Payload...)
		out, err := fn(in)
		if err != nil {
			return e, fmt.Errorf("upcast %s v%d→v%d: %w", e, e.SchemaVersion, e.SchemaVersion+1, err)
		}
		if err := ValidatePayload("payload", out); err != nil {
			return e, fmt.Errorf("upcast %s v%d→v%d: %w", e, e.SchemaVersion, e.SchemaVersion+1, err)
		}
		e.Payload = out
		e.SchemaVersion++
	}
}

// EventTypes is a set of known event types. An empty (or nil) set allows
// every type.
type EventTypes map[string]struct{}

// NewEventTypes returns the set of the given types.
func NewEventTypes(types ...string) EventTypes {
	s := make(EventTypes, len(types))
	for _, t := range types {
		s[t] = struct{}{}
	}
	return s
}

// Check returns a *ValidationError on field "event_type" when the set is
// not empty and does not hold t.
func (s EventTypes) Check(t string) error {
	if len(s) == 0 {
		return nil
	}
	if _, ok := s[t]; ok {
		return nil
	}
	return &ValidationError{Field: "event_type", Reason: fmt.Sprintf("%q is not a known event type (known: %s)", t, strings.Join(s.Names(), ", "))}
}

// Names returns the types of the set, sorted.
func (s EventTypes) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Schema is what a store knows about event payloads: which types exist
// and how old versions upgrade. The zero Schema allows every type and
// upcasts nothing.
type Schema struct {
	Types     EventTypes
	Upcasters *Upcasters
}

// CheckType validates the name of an event type and, when Types is set,
// that it is known.
func (s Schema) CheckType(t string) error {
	if err := ValidateName("event_type", t); err != nil {
		return err
	}
	return s.Types.Check(t)
}
