package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/pause"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/tracing"
)

// Decision errors: a decide function returns one to refuse a command
// without writing anything because the aggregate is not in the state the
// command presumes (Conflict, NotFound). A business refusal ("insufficient
// funds") is eventstore.Reject, from a decide function or a rule, and bad
// input an *eventstore.ValidationError. The dispatcher answers each as the
// command's Result (an answer, not a failure, never retried). A decision
// made with a Code (ConflictWith, NotFoundWith) matches it with
// errors.Is, and so does the command's answer (Result.Err).
type Decision struct {
	Status Status // StatusConflict or StatusNotFound
	Reason string
	Code   eventstore.Code // the kind of refusal; "" for Conflict's and NotFound's
}

func (d *Decision) Error() string { return fmt.Sprintf("%s: %s", d.Status, d.Reason) }

// Unwrap returns the decision's Code (nil without one).
func (d *Decision) Unwrap() error { return codeErr(d.Code) }

// Conflict refuses a command because the aggregate is not in the state it
// presumes (e.g. creating what already exists).
func Conflict(format string, args ...any) error {
	return &Decision{Status: StatusConflict, Reason: fmt.Sprintf(format, args...)}
}

// NotFound refuses a command on an aggregate that does not exist (or was
// deleted).
func NotFound(format string, args ...any) error {
	return &Decision{Status: StatusNotFound, Reason: fmt.Sprintf(format, args...)}
}

// ConflictWith is Conflict of kind code (see eventstore.Code).
func ConflictWith(code eventstore.Code, format string, args ...any) error {
	return &Decision{Status: StatusConflict, Code: code, Reason: fmt.Sprintf(format, args...)}
}

// NotFoundWith is NotFound of kind code (see eventstore.Code).
func NotFoundWith(code eventstore.Code, format string, args ...any) error {
	return &Decision{Status: StatusNotFound, Code: code, Reason: fmt.Sprintf(format, args...)}
}

// Refusal codes of the command layer itself, for the refusals it makes
// before or after a domain decides.
const (
	// ErrVersionConflict: the command's expected version is not the
	// aggregate's, or concurrent appends kept moving it past the
	// handler's retries (StatusConflict).
	ErrVersionConflict eventstore.Code = "commands.version_conflict"
	// ErrNoAggregate: the command expects a version above 0 of an
	// aggregate that has no events (StatusNotFound).
	ErrNoAggregate eventstore.Code = "commands.no_aggregate"
)

// codeErr is c as an error, nil when c is empty.
func codeErr(c eventstore.Code) error {
	if c == "" {
		return nil
	}
	return c
}

// Decide turns a command and the current state of its aggregate (Seq 0
// and the initial state when it has no events) into the events to append.
// It must be pure: it can run several times for one command when
// concurrent writers force a reload.
type Decide[S any] func(cur eventstore.State[S], cmd Command) ([]eventstore.NewEvent, error)

// Handler handles the commands of one type. Handle returns the command's
// Result; an error means the command could not be handled now (a
// permanent one, see eventstore.IsPermanent, means never).
type Handler interface {
	CommandType() string
	AggregateType() string
	Handle(ctx context.Context, cmd Command) (Result, error)
}

// FacetHandlerConfig configures a handler that decides against a facet.
type FacetHandlerConfig[S any] struct {
	CommandType string
	Facet       *eventstore.Facet[S]
	Decide      Decide[S]
	// MaxAttempts bounds reload-and-retry on concurrent appends when the
	// command carries no expected version (default 10).
	MaxAttempts int
}

// facetHandler is the Handler built by NewFacetHandler.
type facetHandler[S any] struct {
	cfg FacetHandlerConfig[S]
}

// NewFacetHandler returns a Handler that loads the aggregate's STATE,
// decides, and appends with the command id through the facet (with
// Facet.AppendWithHistory when the facet has history or fold rules, so
// that they see the aggregate's past: the whole log, or for fold rules
// the latest snapshot and the events after it). On a
// concurrent append it reloads and decides again (bounded, jittered)
// unless the command carried an expected version: then the stale version
// is a StatusConflict result (a STATE rewritten at the same version by a
// recalculation is reloaded and decided again either way). A command id already applied returns the
// original outcome with Duplicate set, and so does one already refused
// (the store's *eventstore.RefusedCommandError). Recording refusals is
// the Dispatcher's job.
func NewFacetHandler[S any](cfg FacetHandlerConfig[S]) (Handler, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &facetHandler[S]{cfg: cfg}, nil
}

func (c *FacetHandlerConfig[S]) setDefaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 10
	}
}

// Validate reports the first missing or invalid field; a zero
// MaxAttempts counts as its default.
func (c FacetHandlerConfig[S]) Validate() error {
	if c.CommandType == "" {
		return fmt.Errorf("commands: FacetHandlerConfig: %w", &eventstore.ValidationError{Field: "CommandType", Reason: "is empty"})
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("commands: handler %s: FacetHandlerConfig: %w", c.CommandType, &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Facet == nil:
		return bad("Facet", "is nil (Facet and Decide are required)")
	case c.Decide == nil:
		return bad("Decide", "is nil (Facet and Decide are required)")
	case c.MaxAttempts < 0:
		return bad("MaxAttempts", "%d < 1", c.MaxAttempts)
	}
	return nil
}

func (h *facetHandler[S]) CommandType() string   { return h.cfg.CommandType }
func (h *facetHandler[S]) AggregateType() string { return h.cfg.Facet.AggregateType() }

func (h *facetHandler[S]) Handle(ctx context.Context, cmd Command) (Result, error) {
	ref := eventstore.Ref{Type: h.AggregateType(), ID: cmd.AggregateID}
	res := Result{CommandID: cmd.ID, AggregateType: ref.Type, AggregateID: ref.ID}
	for attempt := 1; ; attempt++ {
		cur, err := h.cfg.Facet.Get(ctx, cmd.AggregateID)
		switch {
		case errors.Is(err, eventstore.ErrAggregateNotFound):
			cur = h.cfg.Facet.Initial(cmd.AggregateID)
		case errors.Is(err, privacy.ErrForgotten):
			return h.refused(res, err)
		case err != nil:
			return res, err
		}
		res.Version = cur.Seq
		if cmd.ExpectedVersion != nil && *cmd.ExpectedVersion > 0 && cur.Seq == 0 {
			return h.refused(res, &Decision{Status: StatusNotFound, Code: ErrNoAggregate,
				Reason: fmt.Sprintf("%s does not exist (expected version %d)", ref, *cmd.ExpectedVersion)})
		}
		if cmd.ExpectedVersion != nil && *cmd.ExpectedVersion != cur.Seq {
			return h.refused(res, &Decision{Status: StatusConflict, Code: ErrVersionConflict,
				Reason: fmt.Sprintf("expected version %d, actual %d", *cmd.ExpectedVersion, cur.Seq)})
		}
		events, err := h.cfg.Decide(cur, cmd)
		if err != nil {
			return h.refused(res, err)
		}
		appendTo := h.cfg.Facet.AppendTo
		if h.cfg.Facet.NeedsHistory() {
			appendTo = h.cfg.Facet.AppendWithHistory // the rules read the past
		}
		out, err := appendTo(ctx, cur, eventstore.Change{
			Events:    events,
			CommandID: cmd.ID,
			Metadata: eventstore.Metadata{CorrelationID: cmd.CorrelationID, CausationID: cmd.ID, Actor: cmd.Actor, IP: cmd.IP,
				ActorSource: cmd.actorSource(), TraceParent: tracing.TraceParent(ctx)},
		})
		var conflict *eventstore.ConcurrencyError
		switch {
		case err == nil:
			res.Status = StatusAccepted
			res.Version = out.State.Seq
			res.EventIDs = out.Append.EventIDs
			res.Duplicate = out.Duplicate
			return res, nil
		case errors.As(err, &conflict) && (cmd.ExpectedVersion == nil || conflict.StateRewritten) && attempt < h.cfg.MaxAttempts:
			// A STATE rewritten at the same version (a recalculation)
			// leaves an expected version right: decide again on it.
			sleep(ctx, attempt)
			continue
		case errors.As(err, &conflict):
			return h.refused(res, &Decision{Status: StatusConflict, Code: ErrVersionConflict, Reason: err.Error()})
		default:
			return h.refused(res, err)
		}
	}
}

// refused turns err into the command's Result. A decision or a rule's
// refusal is an answer, and so is a forgotten subject (StatusRejected,
// privacy.CodeForgotten); an answer recorded earlier for this command id is
// repeated; a permanent error (eventstore.IsPermanent: bad input) is
// StatusInvalid plus an *InvalidError; anything else is returned for
// retry.
func (h *facetHandler[S]) refused(res Result, err error) (Result, error) {
	var dec *Decision
	var rej *eventstore.RuleRejection
	var recorded *eventstore.RefusedCommandError
	switch {
	case errors.As(err, &recorded):
		res.Status, res.Reason, res.Code, res.Version, res.Duplicate = Status(recorded.Refusal.Status), recorded.Refusal.Reason, recorded.Refusal.Code, recorded.Refusal.Version, true
		if res.Status == StatusInvalid {
			return res, &InvalidError{Err: err}
		}
	case errors.As(err, &dec):
		res.Status, res.Reason, res.Code = dec.Status, dec.Reason, dec.Code
	case errors.As(err, &rej):
		res.Status, res.Reason, res.Code = StatusRejected, rej.Reason, rej.Code
	case errors.Is(err, privacy.ErrForgotten):
		// The aggregate's subject was forgotten: its data cannot be
		// read or written again.
		res.Status, res.Reason, res.Code = StatusRejected, err.Error(), privacy.CodeForgotten
	case eventstore.IsPermanent(err):
		res.Status, res.Reason = StatusInvalid, err.Error()
		return res, &InvalidError{Err: err}
	default:
		return res, err
	}
	return res, nil
}

// InvalidError wraps an input error that no retry can fix; the dispatcher
// answers StatusInvalid and the message is poisoned.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return "invalid command: " + e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// Permanent marks an invalid command as permanent for
// eventstore.IsPermanent.
func (e *InvalidError) Permanent() bool { return true }

// sleep waits a jittered, growing pause before attempt+1 (20 ms doubled,
// at most 1.28 s) or until ctx ends.
func sleep(ctx context.Context, attempt int) {
	_ = pause.Sleep(ctx, pause.Jittered(pause.Backoff(attempt, 20*time.Millisecond, 1280*time.Millisecond)))
}
