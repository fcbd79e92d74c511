// Package subjects is the data subjects' aggregate (type "subject", one
// per subject id): forgetting one is its command, ForgetSubject, and the
// fact that it was forgotten its event, SubjectForgotten, which every
// consumer holding the subject's personal data in clear acts on (the
// read models scrub it). docs/privacy.md.
package subjects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
)

// AggregateType of the data subjects.
const AggregateType = "subject"

// Types of its command and its event.
const (
	ForgetSubject    = "ForgetSubject"    // payload ForgetData
	SubjectForgotten = "SubjectForgotten" // payload ForgottenData
)

// ErrForgottenBefore is the code of a ForgetSubject on a subject
// forgotten before: its keys are gone, the fact is recorded.
const ErrForgottenBefore eventstore.Code = "subject.forgotten_before"

// ForgetData is the payload of ForgetSubject: why (recorded in the fact).
// The handler fills the rest from what forgetting did; what a sender puts
// there is replaced.
type ForgetData struct {
	Reason string `json:"reason,omitempty"`
	ForgottenData
}

// ForgottenData is the payload of SubjectForgotten.
type ForgottenData struct {
	// Scopes are the subject's key scopes ("<aggregate type>/<id>", or
	// "subject/<id>" for data keyed per subject): the aggregates whose
	// personal data was the subject's, which consumers scrub.
	Scopes []string `json:"scopes"`
	// Erased counts the keys deleted (fewer than Scopes when an earlier,
	// interrupted forgetting had deleted some).
	Erased int `json:"erased"`
	// ForgottenAt is when the subject's tombstone was written.
	ForgottenAt time.Time `json:"forgotten_at"`
	Reason      string    `json:"reason,omitempty"`
}

// Definitions of its command and its event.
var (
	ForgetSubjectCommand  = commands.DefineCommand[ForgetData](ForgetSubject)
	SubjectForgottenEvent = eventstore.DefineEvent[ForgottenData](SubjectForgotten)
)

// Subject is a data subject's state.
type Subject struct {
	Forgotten   bool      `json:"forgotten"`
	ForgottenAt time.Time `json:"forgotten_at,omitzero"`
}

// Processor returns the subject's rules.
func Processor() eventstore.Processor[Subject] {
	return eventstore.NewProcessor(func() Subject { return Subject{} },
		eventstore.OnEvent(SubjectForgottenEvent, func(s Subject, d ForgottenData, _ *eventstore.Outbox) (Subject, error) {
			s.Forgotten, s.ForgottenAt = true, d.ForgottenAt
			return s, nil
		}),
	)
}

// Domain describes the subjects' write model. Its one handler,
// ForgetSubject, first forgets the subject in the key store of the event
// store it runs on (an eventstore/dynamodb store with a privacy.Sealer:
// privacy.KeyStore.Forget), then records SubjectForgotten with the
// subject's scopes; a subject forgotten before is answered conflict with
// ErrForgottenBefore. Sent again after a crash between the two, it
// finishes both.
func Domain() commands.Domain {
	d := commands.FacetDomain(AggregateType, Processor(), commands.OnCommand(ForgetSubjectCommand, decideForget))
	facetHandlers := d.NewHandlers
	d.NewHandlers = func(store eventstore.Store, upcasters *eventstore.Upcasters) ([]commands.Handler, error) {
		hs, err := facetHandlers(store, upcasters)
		if err != nil {
			return nil, err
		}
		return []commands.Handler{&forgetHandler{Handler: hs[0], keys: KeysOf(store)}}, nil
	}
	d.NewSnapshot = nil // one event per subject
	return d
}

func decideForget(cur eventstore.State[Subject], cmd commands.Command, d ForgetData) ([]eventstore.NewEvent, error) {
	if cur.Item.Forgotten {
		return nil, commands.ConflictWith(ErrForgottenBefore, "subject %s was forgotten at %s", cmd.AggregateID, cur.Item.ForgottenAt.Format(time.RFC3339))
	}
	d.ForgottenData.Reason = d.Reason
	return []eventstore.NewEvent{SubjectForgottenEvent.New(d.ForgottenData)}, nil
}

// KeysOf returns the key store of store's sealer, nil when store does
// not seal (it has no Sealer() method, or its sealer is not a
// *privacy.Sealer).
func KeysOf(store eventstore.Store) *privacy.KeyStore {
	s, ok := store.(interface{ Sealer() eventstore.Sealer })
	if !ok {
		return nil
	}
	if sealer, ok := s.Sealer().(*privacy.Sealer); ok {
		return sealer.Keys()
	}
	return nil
}

// forgetHandler forgets the subject in the key store, then hands the
// command, its payload filled with what forgetting did, to the facet
// handler that records the fact.
type forgetHandler struct {
	commands.Handler
	keys *privacy.KeyStore
}

// errNoKeys: the store seals nothing, so there is nothing to forget.
var errNoKeys = errors.New("the event store does not seal personal data (no privacy.Sealer): nothing to forget")

func (h *forgetHandler) Handle(ctx context.Context, cmd commands.Command) (commands.Result, error) {
	res := commands.Result{CommandID: cmd.ID, AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID}
	d, err := ForgetSubjectCommand.Decode(cmd)
	if err != nil {
		res.Status, res.Reason = commands.StatusInvalid, err.Error()
		return res, &commands.InvalidError{Err: err}
	}
	if h.keys == nil {
		res.Status, res.Reason = commands.StatusInvalid, errNoKeys.Error()
		return res, &commands.InvalidError{Err: errNoKeys}
	}
	f, err := h.keys.Forget(ctx, cmd.AggregateID)
	if err != nil {
		if eventstore.IsPermanent(err) {
			res.Status, res.Reason = commands.StatusInvalid, err.Error()
			return res, &commands.InvalidError{Err: err}
		}
		return res, fmt.Errorf("forget subject %s: %w", cmd.AggregateID, err)
	}
	scopes, err := h.keys.Scopes(ctx, cmd.AggregateID)
	if err != nil {
		return res, fmt.Errorf("forget subject %s: %w", cmd.AggregateID, err)
	}
	d.ForgottenData = ForgottenData{Scopes: scopes, Erased: f.Erased, ForgottenAt: f.At}
	filled, err := ForgetSubjectCommand.New(cmd.AggregateType, cmd.AggregateID, d)
	if err != nil {
		return res, err
	}
	cmd.Payload = filled.Payload
	return h.Handler.Handle(ctx, cmd)
}

// IDsOf returns the ids of the aggregates of aggregateType among scopes
// (the scopes "<aggregateType>/<id>"), in their order.
func IDsOf(scopes []string, aggregateType string) []string {
	var ids []string
	for _, s := range scopes {
		if id, ok := strings.CutPrefix(s, aggregateType+"/"); ok {
			ids = append(ids, id)
		}
	}
	return ids
}
