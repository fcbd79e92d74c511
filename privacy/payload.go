package privacy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Personal declares which fields of a JSON payload are personal data and
// whose: the data subject, named by a field of the payload or by the
// aggregate's id. The data is sealed with a key per aggregate (its
// scope, "<aggregate type>/<id>"), or per subject with KeyPerSubject;
// the subject owns the key. Fields and Subject are JSON pointers (RFC 6901) into
// the payload's objects ("/title", "/holder/name"); a personal field
// holds a string (names, titles, descriptions, addresses, URLs: declare
// each one of a nested object) or null.
type Personal struct {
	// Subject points at the field holding the subject's id (a string).
	// Empty when SubjectIsAggregate. With a key per aggregate, only the
	// aggregate's first personal event must hold it (its later events
	// find the key made then): declare it on every event type that has
	// the field, and on the others only Fields.
	Subject string
	// SubjectIsAggregate: the aggregate's id is the subject's (a bank
	// account is its holder's).
	SubjectIsAggregate bool
	// OrAggregate makes the aggregate's id the subject's when a payload
	// lacks Subject or holds "" there (a todo whose creator was not
	// verified has no owner: it is its own subject, forgotten by its id).
	OrAggregate bool
	// Fields point at the personal fields. A field absent from a payload
	// is left absent; one that is null stays null.
	Fields []string
	// SubjectIsActor (commands only: commands.Domain.PersonalCommands)
	// makes the command's actor the subject when the handlers take it as
	// verified (a signed command's); with OrAggregate, the aggregate's
	// id when it has none. It names the subject of the key the command's
	// aggregate gets when the command is the first to seal for it, so
	// declare the same subject its events will name (a todo's owner is
	// its verified creator).
	SubjectIsActor bool
	// KeyPerSubject seals with one key per subject (scope
	// "subject/<id>") instead of one per aggregate: for events whose
	// aggregate is not the subject's (an analytics user's events across
	// sessions). The subject must then be in every payload.
	KeyPerSubject bool
}

// Validate reports a declaration that cannot work: no subject or two, no
// field, a malformed pointer, the subject among the personal fields.
func (p Personal) Validate() error {
	bad := func(field, reason string) error {
		return fmt.Errorf("privacy: Personal: %w", &eventstore.ValidationError{Field: field, Reason: reason})
	}
	switch {
	case p.Subject == "" && !p.SubjectIsAggregate && p.KeyPerSubject:
		return bad("Subject", "is empty with KeyPerSubject: every payload must name its subject")
	case p.Subject != "" && p.SubjectIsAggregate:
		return bad("Subject", "is set and SubjectIsAggregate too: pick one")
	case p.SubjectIsActor && (p.Subject != "" || p.SubjectIsAggregate):
		return bad("SubjectIsActor", "is set with another subject: pick one")
	case p.SubjectIsActor && p.KeyPerSubject && !p.OrAggregate:
		return bad("SubjectIsActor", "is set with KeyPerSubject: a command without a verified actor would have no subject (add OrAggregate, or name the subject in the payload)")
	case p.OrAggregate && p.Subject == "" && !p.SubjectIsActor:
		return bad("OrAggregate", "is set without a Subject to fall back from")
	case p.OrAggregate && p.KeyPerSubject:
		return bad("OrAggregate", "is set with KeyPerSubject: a key per subject needs the subject in every payload")
	case len(p.Fields) == 0:
		return bad("Fields", "is empty")
	}
	if p.Subject != "" {
		if _, err := splitPointer(p.Subject); err != nil {
			return bad("Subject", err.Error())
		}
	}
	seen := map[string]bool{}
	for _, f := range p.Fields {
		if _, err := splitPointer(f); err != nil {
			return bad("Fields", err.Error())
		}
		switch {
		case f == p.Subject:
			return bad("Fields", fmt.Sprintf("%q is the subject's id, which must stay in clear to find its key", f))
		case seen[f]:
			return bad("Fields", fmt.Sprintf("%q twice", f))
		}
		seen[f] = true
	}
	return nil
}

// splitPointer splits a JSON pointer into its unescaped reference tokens.
func splitPointer(ptr string) ([]string, error) {
	if !strings.HasPrefix(ptr, "/") || len(ptr) < 2 {
		return nil, fmt.Errorf("%q is not a JSON pointer to a field (want /name or /a/b)", ptr)
	}
	parts := strings.Split(ptr[1:], "/")
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%q has an empty reference token", ptr)
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// Binding is what a sealed field is bound to: the aggregate and the
// event (or item) it was sealed in. The field's pointer is added to it.
type Binding struct {
	AggregateType, AggregateID string
	// Item names what holds the value in the aggregate: an event
	// ("event/<type>/<sequence>"), its STATE, a snapshot.
	Item string
}

func (b Binding) bytes(field string) []byte {
	return []byte(b.AggregateType + "\x00" + b.AggregateID + "\x00" + b.Item + "\x00" + field)
}

// ForgottenText is what a personal field of a forgotten subject reads as
// after OpenPayload.
const ForgottenText = "[forgotten]"

// SealPayload returns payload with each personal field of p sealed with
// its scope's key (made for the subject on the scope's first sealing),
// bound to b and the field. A forgotten subject is a *ForgottenError; a
// payload without its subject's id where one is needed, or with a
// personal field that is not a string, a *eventstore.ValidationError:
// nothing is sealed, and the caller writes nothing.
func SealPayload(ctx context.Context, keys *KeyStore, p Personal, b Binding, payload []byte) ([]byte, error) {
	return sealPayload(ctx, keys, p, b, payload, false, "")
}

// sealPayload is SealPayload; with orAggregate, a payload that names no
// subject has its aggregate as subject (used only when the scope has no
// key yet: an aggregate stored before sealing began). actor is a
// command's verified actor (SubjectIsActor).
func sealPayload(ctx context.Context, keys *KeyStore, p Personal, b Binding, payload []byte, orAggregate bool, actor string) ([]byte, error) {
	doc, err := decode(payload)
	if err != nil {
		return nil, err
	}
	subject, err := subjectOf(p, b, doc)
	if err != nil {
		return nil, err
	}
	if p.SubjectIsActor {
		subject = actor
		if subject == "" && p.OrAggregate {
			subject = b.AggregateID
		}
		if err := validID("subject", subject); err != nil && subject != "" {
			return nil, err
		}
	}
	if subject == "" && orAggregate && !p.KeyPerSubject {
		if err := validID("aggregate id", b.AggregateID); err != nil {
			return nil, err
		}
		subject = b.AggregateID
	}
	scope := b.AggregateType + "/" + b.AggregateID
	if p.KeyPerSubject {
		scope = "subject/" + subject
	}
	var key *DataKey
	for _, field := range p.Fields {
		parent, last, v, ok := lookup(doc, field)
		if !ok || v == nil {
			continue
		}
		if _, isString := v.(string); !isString {
			return nil, fmt.Errorf("privacy: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf("is personal and holds a %T: a personal field holds a string or null", v)})
		}
		if key == nil {
			if key, err = keys.KeyForSealing(ctx, scope, subject); err != nil {
				return nil, err
			}
		}
		plain, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		sealed, err := Seal(key, b.bytes(field), plain)
		if err != nil {
			return nil, err
		}
		parent[last] = sealed
	}
	return json.Marshal(doc)
}

// OpenPayload reverses SealPayload: each sealed personal field is opened
// with its scope's key. When the subject was forgotten, each of its
// fields reads as ForgottenText, and forgotten is true. A sealed value that does not open (altered, or moved from
// another event or field) is a *eventstore.DecodeError; a KMS failure a
// *KeyError.
func OpenPayload(ctx context.Context, keys *KeyStore, p Personal, b Binding, payload []byte) (opened []byte, forgotten bool, err error) {
	doc, err := decode(payload)
	if err != nil {
		return nil, false, err
	}
	for _, field := range p.Fields {
		parent, last, v, ok := lookup(doc, field)
		if !ok || v == nil {
			continue
		}
		s, isString := v.(string)
		if !isString || !strings.HasPrefix(s, SealedPrefix) {
			return nil, false, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "payload", Field: field, Reason: "is personal but not sealed"})
		}
		plain, err := Open(ctx, keys, b.bytes(field), s)
		var fe *ForgottenError
		switch {
		case errors.As(err, &fe):
			forgotten = true
			parent[last] = ForgottenText
			continue
		case err != nil:
			return nil, false, err
		}
		var value any
		if err := unmarshal(plain, &value); err != nil {
			return nil, false, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "sealed value", Field: field, Reason: err.Error()})
		}
		parent[last] = value
	}
	out, err := json.Marshal(doc)
	return out, forgotten, err
}

// isSealed reports whether every personal field of p that payload holds
// (a string) is a sealed value already.
func isSealed(p Personal, payload []byte) (bool, error) {
	if !bytes.Contains(payload, []byte(SealedPrefix)) {
		return false, nil
	}
	doc, err := decode(payload)
	if err != nil {
		return false, err
	}
	for _, field := range p.Fields {
		_, _, v, ok := lookup(doc, field)
		if !ok || v == nil {
			continue
		}
		if s, isString := v.(string); !isString {
			return false, nil
		} else if _, _, err := parse(s); err != nil {
			return false, nil
		}
	}
	return true, nil
}

// subjectOf is the payload's subject: the aggregate's id, the Subject
// field's value, or "" when the declaration names a field the payload
// lacks and the key is per aggregate (KeyForSealing then needs the key
// to exist).
func subjectOf(p Personal, b Binding, doc map[string]any) (string, error) {
	if p.SubjectIsAggregate {
		if err := validID("aggregate id", b.AggregateID); err != nil {
			return "", err
		}
		return b.AggregateID, nil
	}
	if p.Subject == "" {
		return "", nil
	}
	_, _, v, ok := lookup(doc, p.Subject)
	if p.OrAggregate && (!ok || v == "" || v == nil) {
		if err := validID("aggregate id", b.AggregateID); err != nil {
			return "", err
		}
		return b.AggregateID, nil
	}
	if !ok && !p.KeyPerSubject {
		return "", nil
	}
	s, isString := v.(string)
	if !ok || !isString {
		return "", fmt.Errorf("privacy: %w", &eventstore.ValidationError{Field: p.Subject, Reason: "holds no subject id (want a string): the payload's personal data has no owner"})
	}
	if err := validID(p.Subject, s); err != nil {
		return "", err
	}
	return s, nil
}

// lookup finds the value at ptr: its parent object, its key there, the
// value and whether it is present.
func lookup(doc map[string]any, ptr string) (map[string]any, string, any, bool) {
	parts, err := splitPointer(ptr)
	if err != nil {
		return nil, "", nil, false
	}
	obj := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := obj[p].(map[string]any)
		if !ok {
			return nil, "", nil, false
		}
		obj = next
	}
	last := parts[len(parts)-1]
	v, ok := obj[last]
	return obj, last, v, ok
}

func decode(payload []byte) (map[string]any, error) {
	var doc map[string]any
	if err := unmarshal(payload, &doc); err != nil || doc == nil {
		reason := "is not a JSON object"
		if err != nil {
			reason = err.Error()
		}
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "payload", Reason: reason})
	}
	return doc, nil
}

// unmarshal decodes keeping numbers as they were written (json.Number).
func unmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
