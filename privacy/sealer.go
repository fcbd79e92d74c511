package privacy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/eventpipe/eventpipe/eventstore"
)

// SealerConfig configures a Sealer.
type SealerConfig struct {
	// Keys keeps the data keys. Required.
	Keys *KeyStore
	// Personal declares the personal data of the event types, by
	// aggregate type then event type (a catalogue's domains'
	// commands.Domain.Personal). An aggregate type without declarations
	// is never sealed.
	Personal map[string]map[string]Personal
	// Commands declares the personal data of command payloads, by
	// aggregate type then command type (commands.Domain.PersonalCommands):
	// what SealCommand seals for the bus and OpenCommand opens.
	Commands map[string]map[string]Personal
}

// Validate reports the first unusable field.
func (c SealerConfig) Validate() error {
	bad := func(field, reason string) error {
		return fmt.Errorf("privacy: SealerConfig: %w", &eventstore.ValidationError{Field: field, Reason: reason})
	}
	if c.Keys == nil {
		return bad("Keys", "is nil")
	}
	for _, agg := range slices.Sorted(maps.Keys(c.Personal)) {
		for _, t := range slices.Sorted(maps.Keys(c.Personal[agg])) {
			p := c.Personal[agg][t]
			field := fmt.Sprintf("Personal[%s][%s]", agg, t)
			if err := p.Validate(); err != nil {
				return fmt.Errorf("privacy: SealerConfig: %s: %w", field, err)
			}
			if p.KeyPerSubject {
				// The aggregate's STATE and snapshots are sealed with its
				// own key, which a key per subject never makes.
				return bad(field, "has KeyPerSubject: an aggregate's events are sealed with the aggregate's key (KeyPerSubject is for data outside the event store, such as analytics)")
			}
		}
	}
	for _, agg := range slices.Sorted(maps.Keys(c.Commands)) {
		for _, t := range slices.Sorted(maps.Keys(c.Commands[agg])) {
			if err := c.Commands[agg][t].Validate(); err != nil {
				return fmt.Errorf("privacy: SealerConfig: Commands[%s][%s]: %w", agg, t, err)
			}
		}
	}
	return nil
}

// Sealer seals the personal data of an event store's aggregates before
// it is written and opens it after it is read: it is the
// eventstore.Sealer of eventstore/dynamodb's Config.Sealer, and the
// eventstore.Opener of the consumers.
//
//   - An event's declared personal fields are sealed one by one
//     (SealPayload), bound to the event's id and the field, with its
//     aggregate's key, which the first personal event makes for its
//     subject.
//   - The aggregate's documents (its STATE, its snapshot, the payloads of
//     its outbound events) are folds of its events, holding the same
//     data: once the aggregate has a key, each is sealed whole with it,
//     bound to the aggregate and the document's name.
//
// Reading a forgotten subject's events gives their personal fields as
// ForgottenText; reading its aggregate's documents is a *ForgottenError,
// and so is writing anything new for it. What was stored before sealing
// began (no sealed value in it) is read as it is.
type Sealer struct {
	keys     *KeyStore
	personal map[string]map[string]Personal
	commands map[string]map[string]Personal
}

var (
	_ eventstore.Sealer        = (*Sealer)(nil)
	_ eventstore.CommandSealer = (*Sealer)(nil)
)

// NewSealer returns a Sealer on cfg.
func NewSealer(cfg SealerConfig) (*Sealer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sealer{keys: cfg.Keys, personal: cfg.Personal, commands: cfg.Commands}, nil
}

// Keys returns the key store the sealer seals with.
func (s *Sealer) Keys() *KeyStore { return s.keys }

func (s *Sealer) declared(e eventstore.Envelope) (Personal, bool) {
	p, ok := s.personal[e.AggregateType][e.EventType]
	return p, ok
}

// EventBinding is what an event's sealed fields are bound to: its
// aggregate and its id.
func EventBinding(e eventstore.Envelope) Binding {
	return Binding{AggregateType: e.AggregateType, AggregateID: e.AggregateID, Item: "event/" + e.EventID}
}

// SealEvent returns e with its declared personal fields sealed. The
// first personal event of an aggregate makes its key for the subject it
// names; one that names none (an aggregate stored before sealing began,
// whose creation was not sealed) makes the aggregate its own subject. A
// forgotten subject is a *ForgottenError; a personal field that is not a
// string a *eventstore.ValidationError; a KMS failure a *KeyError.
func (s *Sealer) SealEvent(ctx context.Context, e eventstore.Envelope) (eventstore.Envelope, error) {
	p, ok := s.declared(e)
	if !ok {
		return e, nil
	}
	payload, err := sealPayload(ctx, s.keys, p, EventBinding(e), e.Payload, true, "")
	if err != nil {
		return e, err
	}
	e.Payload = payload
	return e, nil
}

// OpenEvent returns e with its sealed personal fields opened; a forgotten
// subject's read as ForgottenText. An event stored before sealing began
// (no sealed value in it) is returned as it is.
func (s *Sealer) OpenEvent(ctx context.Context, e eventstore.Envelope) (eventstore.Envelope, error) {
	p, ok := s.declared(e)
	if !ok || !bytes.Contains(e.Payload, []byte(SealedPrefix)) {
		return e, nil
	}
	payload, _, err := OpenPayload(ctx, s.keys, p, EventBinding(e), e.Payload)
	if err != nil {
		return e, err
	}
	e.Payload = payload
	return e, nil
}

// Scope is the scope of an aggregate's key: "<type>/<id>".
func Scope(ref eventstore.Ref) string { return ref.Type + "/" + ref.ID }

// SealDocument returns data, the document item of ref, sealed whole with
// ref's key as a JSON string, or as given when ref's aggregate type
// declares no personal data or ref has no key (none of its events held
// any). A forgotten subject is a *ForgottenError.
func (s *Sealer) SealDocument(ctx context.Context, ref eventstore.Ref, item string, data json.RawMessage) (json.RawMessage, error) {
	if len(s.personal[ref.Type]) == 0 {
		return data, nil
	}
	key, err := s.keys.KeyIfAny(ctx, Scope(ref))
	if err != nil || key == nil {
		return data, err
	}
	sealed, err := Seal(key, documentBinding(ref, item), data)
	if err != nil {
		return nil, err
	}
	return json.Marshal(sealed)
}

// OpenDocument reverses SealDocument. A document that is not sealed is
// returned as given; a forgotten subject's is a *ForgottenError; one
// altered or moved from another aggregate or item a
// *eventstore.DecodeError.
func (s *Sealer) OpenDocument(ctx context.Context, ref eventstore.Ref, item string, data json.RawMessage) (json.RawMessage, error) {
	if !bytes.HasPrefix(data, []byte(`"`+SealedPrefix)) {
		return data, nil
	}
	var sealed string
	if err := json.Unmarshal(data, &sealed); err != nil {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: item + " of " + ref.String(), Reason: err.Error()})
	}
	plain, err := Open(ctx, s.keys, documentBinding(ref, item), sealed)
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %w", item, ref, err)
	}
	return plain, nil
}

// OpenOutbound returns o with its payload opened (OpenDocument).
func (s *Sealer) OpenOutbound(ctx context.Context, o eventstore.OutboundRecord) (eventstore.OutboundRecord, error) {
	p, err := s.OpenDocument(ctx, eventstore.Ref{Type: o.AggregateType, ID: o.AggregateID}, eventstore.OutboundDocument(o.Seq, o.Index), o.Payload)
	if err != nil {
		return o, err
	}
	o.Payload = p
	return o, nil
}

func documentBinding(ref eventstore.Ref, item string) []byte {
	return Binding{AggregateType: ref.Type, AggregateID: ref.ID, Item: item}.bytes("")
}

// KeyChecks returns, for eventstore/dynamodb's append, a condition check
// per data key the values of sealed were sealed with: that the key is
// still in the keys table. An append with a key cached here while another
// process forgot its subject then fails with the check's
// *ForgottenError, and writes nothing.
func (s *Sealer) KeyChecks(sealed eventstore.AppendRequest) ([]types.TransactWriteItem, []error) {
	scopes := map[string]bool{}
	for _, e := range sealed.Events {
		scopesIn(e.Payload, scopes)
	}
	scopesIn(sealed.State, scopes)
	for _, o := range sealed.Outbound {
		scopesIn(o.Payload, scopes)
	}
	checks := make([]types.TransactWriteItem, 0, len(scopes))
	gone := make([]error, 0, len(scopes))
	for _, scope := range slices.Sorted(maps.Keys(scopes)) {
		checks = append(checks, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(s.keys.cfg.Table), Key: itemKey(keyPK(scope), skKey),
			ConditionExpression: aws.String("attribute_exists(#w)"), ExpressionAttributeNames: map[string]string{"#w": AttrWrapped},
		}})
		gone = append(gone, &ForgottenError{Scope: scope})
	}
	return checks, gone
}

// scopesIn adds the scope of every sealed value in b to into.
func scopesIn(b []byte, into map[string]bool) {
	for {
		i := bytes.Index(b, []byte(SealedPrefix))
		if i < 0 {
			return
		}
		b = b[i+len(SealedPrefix):]
		end := bytes.IndexByte(b, '.')
		if end < 0 {
			return
		}
		if scope, err := base64.RawURLEncoding.DecodeString(string(b[:end])); err == nil && validID("scope", string(scope)) == nil {
			into[string(scope)] = true
		}
		b = b[end:]
	}
}

// CommandBinding is what a command's sealed fields are bound to: its
// aggregate, type and id.
func CommandBinding(c eventstore.CommandRef) Binding {
	return Binding{AggregateType: c.Aggregate.Type, AggregateID: c.Aggregate.ID, Item: "command/" + c.Type + "/" + c.ID}
}

// SealCommand returns payload with the command's declared personal
// fields sealed with its aggregate's key (or its subject's, with
// KeyPerSubject), bound to the command, as a sender publishes it. The
// command that makes the aggregate's key names its subject as its
// declaration says (Personal.SubjectIsActor: c.VerifiedActor). A payload
// whose personal fields are sealed already is returned as given (a
// command sealed when it was recorded, sent again). A forgotten subject
// is a *ForgottenError; bad input a *eventstore.ValidationError; a KMS
// failure a *KeyError.
func (s *Sealer) SealCommand(ctx context.Context, c eventstore.CommandRef, payload json.RawMessage) (json.RawMessage, error) {
	p, ok := s.commands[c.Aggregate.Type][c.Type]
	if !ok {
		return payload, nil
	}
	if sealed, err := isSealed(p, payload); err != nil || sealed {
		return payload, err
	}
	return sealPayload(ctx, s.keys, p, CommandBinding(c), payload, false, c.VerifiedActor)
}

// OpenCommand reverses SealCommand; a payload without sealed values (a
// command built in process, or by a producer that does not seal) is
// returned as given. A forgotten subject's command is a
// *ForgottenError: its data cannot be read, nor written again.
func (s *Sealer) OpenCommand(ctx context.Context, c eventstore.CommandRef, payload json.RawMessage) (json.RawMessage, error) {
	p, ok := s.commands[c.Aggregate.Type][c.Type]
	if !ok || !bytes.Contains(payload, []byte(SealedPrefix)) {
		return payload, nil
	}
	opened, forgotten, err := OpenPayload(ctx, s.keys, p, CommandBinding(c), payload)
	if err != nil {
		return nil, err
	}
	if forgotten {
		return nil, &ForgottenError{Scope: Scope(c.Aggregate)}
	}
	return opened, nil
}
