package analytics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/eventpipe/eventpipe/privacy"
)

// PersonalFields are a raw event's personal fields, the JSON names of
// Event: sealed for a signed-in user when Config.Keys is set (the data
// subject is the event's userId). A session's entryUrl and exitUrl are
// copies of its events' urls, sealed as they were.
var PersonalFields = []string{"url", "referrer", "userAgent", "properties"}

// userScope is the key scope of a user's analytics data: the subject's
// own scope, shared with whatever else holds that subject's data.
func userScope(userID string) string { return "subject/" + userID }

// sealBinding binds a sealed field to its event: the source, the
// event's id and the field, so a value moved to another event or field
// does not open.
func sealBinding(sourceID, eventID, field string) []byte {
	return []byte("analytics\x00" + sourceID + "\x00" + eventID + "\x00" + field)
}

// sealed returns the item of e with its personal fields sealed under
// its user's key (e itself stays clear); an anonymous event's item, or
// any item of a store without keys, is in clear. A forgotten user is a
// *privacy.ForgottenError, a KMS failure a *privacy.KeyError.
func (s *Store) sealed(ctx context.Context, e Event, props []byte) (item, error) {
	if s.cfg.Keys == nil || e.UserID == "" {
		return eventItem(e, props), nil
	}
	var key *privacy.DataKey
	seal := func(field string, v *string) error {
		if *v == "" {
			return nil
		}
		if key == nil {
			var err error
			if key, err = s.cfg.Keys.KeyForSealing(ctx, userScope(e.UserID), e.UserID); err != nil {
				return err
			}
		}
		out, err := privacy.Seal(key, sealBinding(e.SourceID, e.EventID, field), []byte(*v))
		*v = out
		return err
	}
	p := string(props)
	for _, f := range []struct {
		name string
		v    *string
	}{{"url", &e.URL}, {"referrer", &e.Referrer}, {"userAgent", &e.UserAgent}, {"properties", &p}} {
		if err := seal(f.name, f.v); err != nil {
			return nil, err
		}
	}
	return eventItem(e, []byte(p)), nil
}

// openField opens one sealed value of the event eventID; a clear value
// (stored before sealing, or anonymous) reads as it is, a forgotten
// user's as privacy.ForgottenText.
func (s *Store) openField(ctx context.Context, sourceID, eventID, field, v string) (string, error) {
	if !strings.HasPrefix(v, privacy.SealedPrefix) {
		return v, nil
	}
	if s.cfg.Keys == nil {
		return "", fmt.Errorf("%s of event %s is sealed and this store has no keys to open it (Config.Keys)", field, eventID)
	}
	plain, err := privacy.Open(ctx, s.cfg.Keys, sealBinding(sourceID, eventID, field), v)
	if fe := (*privacy.ForgottenError)(nil); errors.As(err, &fe) {
		return privacy.ForgottenText, nil
	}
	if err != nil {
		return "", fmt.Errorf("%s of event %s: %w", field, eventID, err)
	}
	return string(plain), nil
}

// openEvent opens e's sealed fields. A forgotten user's properties read
// as {"forgotten": true}.
func (s *Store) openEvent(ctx context.Context, e *Event) error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"url", &e.URL}, {"referrer", &e.Referrer}, {"userAgent", &e.UserAgent}} {
		var err error
		if *f.v, err = s.openField(ctx, e.SourceID, e.EventID, f.name, *f.v); err != nil {
			return err
		}
	}
	if e.SealedProperties == "" {
		return nil
	}
	p, err := s.openField(ctx, e.SourceID, e.EventID, "properties", e.SealedProperties)
	if err != nil {
		return err
	}
	e.SealedProperties = ""
	if p == privacy.ForgottenText {
		e.Properties = map[string]any{"forgotten": true}
		return nil
	}
	if e.Properties, err = decodeProperties(p); err != nil {
		return fmt.Errorf("properties of event %s: %w", e.EventID, err)
	}
	return nil
}

// eventReader decodes raw event items and opens them.
func (s *Store) eventReader(ctx context.Context) func(item) (Event, error) {
	return func(it item) (Event, error) {
		e, err := decodeEvent(it)
		if err != nil {
			return e, err
		}
		return e, s.openEvent(ctx, &e)
	}
}

// sessionReader decodes session items and opens their entry and exit
// urls (each sealed as the url of the event it names).
func (s *Store) sessionReader(ctx context.Context) func(item) (Session, error) {
	return func(it item) (Session, error) {
		sess, err := decodeSession(it)
		if err != nil {
			return sess, err
		}
		if sess.EntryURL, err = s.openField(ctx, sess.SourceID, (&decoder{it: it}).s(AttrEntryEventID), "url", sess.EntryURL); err != nil {
			return sess, fmt.Errorf("entry url of session %s: %w", sess.SessionID, err)
		}
		if sess.ExitURL, err = s.openField(ctx, sess.SourceID, (&decoder{it: it}).s(AttrExitEventID), "url", sess.ExitURL); err != nil {
			return sess, fmt.Errorf("exit url of session %s: %w", sess.SessionID, err)
		}
		return sess, nil
	}
}

// decodeProperties parses properties stored as a JSON object, keeping
// numbers' digits.
func decodeProperties(p string) (map[string]any, error) {
	var props map[string]any
	dec := json.NewDecoder(strings.NewReader(p))
	dec.UseNumber()
	if err := dec.Decode(&props); err != nil {
		return nil, err
	}
	return props, nil
}
