package sagas

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Kind says what an Input is.
type Kind string

// Input kinds.
const (
	KindEvent    Kind = "event"    // an event from an events topic
	KindOutbound Kind = "outbound" // an outbound event from an outbound topic
	KindResult   Kind = "result"   // the answer to a command the saga sent
	KindTimeout  Kind = "timeout"  // a timeout the saga set fell due
	// KindAbort is an operator's abort (Operator.Abort): it goes to the
	// saga's Abort, never to Handle.
	KindAbort Kind = "abort"
)

// Input is one thing that happened to a saga instance.
type Input struct {
	// ID identifies the input for deduplication: event:<event id>,
	// outbound:<record id>, result:<command id>, or
	// timeout:<name>:<due time>. An input whose ID the instance's saga
	// handled before is skipped.
	ID   string
	Kind Kind
	// Event is set for KindEvent.
	Event eventstore.Envelope
	// Outbound is set for KindOutbound.
	Outbound eventstore.OutboundRecord
	// Result and Step are set for KindResult: the command's answer and
	// the step that sent it (see Effects.Send).
	Result commands.Result
	Step   string
	// Timeout and Due are set for KindTimeout: the timeout's name and
	// when it fell due.
	Timeout string
	Due     time.Time
	// CorrelationID is the input's correlation id, given to the commands
	// the saga sends in reply (empty: the instance's id).
	CorrelationID string
	// Actor and Reason are set for KindAbort: who aborted the instance
	// and why.
	Actor, Reason string
}

// Saga defines a process manager whose instances have state S (encoded
// as JSON in Postgres).
type Saga[S any] struct {
	// Name names the saga: its consumer group (<prefix>saga.<name>), its
	// poison topic, its rows, and the start of its command ids. Letters,
	// digits, '-' and '_'. Required.
	Name string
	// Events are the aggregate types whose events topics the saga reads.
	Events []string
	// Outbound are the outbound event names whose topics the saga reads.
	Outbound []string
	// Route names the instance an event or outbound input concerns (""
	// when none: the input is skipped) and whether it may start that
	// instance; an input for an instance that does not exist and may not
	// start it is skipped. Results and timeouts carry their instance.
	// Required.
	Route func(in Input) (instance string, start bool)
	// Initial is a new instance's state. Required.
	Initial func(instance string) S
	// Handle reacts to one input: it returns the instance's next state
	// and records what to do in fx. It must be pure (no I/O): it runs in
	// the instance's transaction, and everything it decides takes effect
	// only if that commits. An error that eventstore.IsPermanent
	// reports permanent poisons the input; any other is retried.
	// Required.
	Handle func(state S, in Input, fx *Effects) (S, error)
	// Abort, when set, is the saga's compensation: it gets the state of
	// an instance an operator aborts (Operator.Abort, `eventpipe sagas
	// abort`) and the KindAbort input, and records in fx what undoes the
	// work so far (cancel the step in flight, refund what was taken). Its
	// effects go through the outbox like Handle's, so they run exactly
	// once in effect. It may Finish at once, or leave the instance running
	// while the compensation's answers come back to Handle, which should
	// then finish with OutcomeAborted. Pure, like Handle. Without Abort,
	// an abort finishes the instance with OutcomeAborted and sends
	// nothing.
	Abort func(state S, in Input, fx *Effects) (S, error)
}

// OutcomeAborted is the outcome of an instance ended by Operator.Abort
// (a saga with an Abort hook finishes with it when its compensation is
// done).
const OutcomeAborted = "aborted"

// Compensates reports whether the saga has an Abort hook.
func (s Saga[S]) Compensates() bool { return s.Abort != nil }

// Definition is a Saga of any state type, for the Runner.
type Definition interface {
	// SagaName is the saga's Name.
	SagaName() string
	// Validate reports what makes the saga unusable.
	Validate() error
	// Topics are the topics the saga reads in the namespace t: its
	// events and outbound topics, and its own replies topic
	// (ReplyTopic).
	Topics(t bus.Topics) []string
	compile() (compiled, error)
}

// SagaName is s.Name.
func (s Saga[S]) SagaName() string { return s.Name }

// Topics are the topics the saga reads in the namespace t: its events
// and outbound topics, and its own replies topic (ReplyTopic).
func (s Saga[S]) Topics(t bus.Topics) []string {
	var out []string
	for _, a := range s.Events {
		out = append(out, t.Events(a))
	}
	for _, o := range s.Outbound {
		out = append(out, t.Outbound(o))
	}
	return append(out, ReplyTopic(t, s.Name))
}

// ReplyTopic is where the answers to a saga's commands go in the
// namespace t: t.RepliesFor("saga." + name). The saga's commands name it
// in their reply_to metadata (commands.MetadataReplyTo), so a saga reads
// the answers to its own commands and no others.
func ReplyTopic(t bus.Topics, name string) string { return t.RepliesFor("saga." + name) }

// Validate reports what makes s unusable.
func (s Saga[S]) Validate() error {
	_, err := s.compile()
	return err
}

// compiled is a Saga with its state erased to JSON.
type compiled struct {
	name     string
	events   []string
	outbound []string
	route    func(in Input) (string, bool)
	initial  func(instance string) ([]byte, error)
	handle   func(state []byte, in Input, fx *Effects) ([]byte, error)
	// compensates: the saga has an Abort hook.
	compensates bool
}

func (s Saga[S]) compile() (compiled, error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("sagas: Saga: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if err := validPart("Name", s.Name); err != nil {
		return compiled{}, fmt.Errorf("sagas: Saga: %w", err)
	}
	switch {
	case len(s.Events) == 0 && len(s.Outbound) == 0:
		return compiled{}, bad("Events", "is empty and so is Outbound: saga %s reads no events and no outbound events", s.Name)
	case s.Route == nil:
		return compiled{}, bad("Route", "is nil: saga %s needs Route, Initial and Handle", s.Name)
	case s.Initial == nil:
		return compiled{}, bad("Initial", "is nil: saga %s needs Route, Initial and Handle", s.Name)
	case s.Handle == nil:
		return compiled{}, bad("Handle", "is nil: saga %s needs Route, Initial and Handle", s.Name)
	}
	c := compiled{name: s.Name, events: s.Events, outbound: s.Outbound, route: s.Route, compensates: s.Abort != nil}
	c.initial = func(instance string) ([]byte, error) {
		b, err := json.Marshal(s.Initial(instance))
		if err != nil {
			return nil, fmt.Errorf("sagas: %s: encode initial state: %w", s.Name, err)
		}
		return b, nil
	}
	c.handle = func(raw []byte, in Input, fx *Effects) ([]byte, error) {
		var state S
		if err := json.Unmarshal(raw, &state); err != nil {
			return nil, &eventstore.DecodeError{What: "saga " + s.Name + " state of " + fx.instance, Reason: err.Error()}
		}
		var (
			next S
			err  error
		)
		switch {
		case in.Kind == KindAbort && s.Abort == nil:
			fx.Finish(OutcomeAborted)
			next = state
		case in.Kind == KindAbort:
			next, err = s.Abort(state, in, fx)
		default:
			next, err = s.Handle(state, in, fx)
		}
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("sagas: %s: encode state: %w", s.Name, err)
		}
		return b, nil
	}
	return c, nil
}

// validPart checks a saga or step name: it becomes part of topic names
// and command ids, so letters, digits, '-' and '_' only.
func validPart(field, v string) error {
	if v == "" || len(v) > 64 || strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf("%q: want 1 to 64 letters, digits, '-' or '_'", v)}
	}
	return nil
}

// CommandID is the id of the command the instance of saga sends at step:
// <saga>.<instance>.<step>. The same step of the same instance always
// sends the same id, so a command sent twice is handled once.
func CommandID(saga, instance, step string) string { return saga + "." + instance + "." + step }

// ParseCommandID splits a command id of saga into its instance and step;
// ok is false for any other command id.
func ParseCommandID(saga, id string) (instance, step string, ok bool) {
	rest, found := strings.CutPrefix(id, saga+".")
	if !found {
		return "", "", false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot <= 0 || dot == len(rest)-1 {
		return "", "", false
	}
	return rest[:dot], rest[dot+1:], true
}

// Effects collects what a saga's Handle decides for one input; the
// Runner carries it out once the instance's transaction commits.
type Effects struct {
	saga, instance, correlation string
	now                         time.Time
	sends                       []commands.Command
	cancels                     []Cancellation
	timeouts                    map[string]time.Time
	cleared                     map[string]bool
	outcome                     string
	errs                        []error
}

// Cancellation is an Effects.Cancel: the command to cancel, on its
// aggregate, and why.
type Cancellation struct {
	CommandID     string `json:"command_id"`
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	Reason        string `json:"reason"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Code is the refusal's code: none for a saga's own cancellation,
	// privacy.CodeForgotten for a command the Runner could not send
	// because its aggregate's subject was forgotten.
	Code eventstore.Code `json:"code,omitempty"`
}

// NewEffects returns the Effects the Runner gives Handle for an input of
// instance of saga at now; tests of a saga's Handle use it and read what
// Handle recorded with Commands, Cancellations, Timeouts, Outcome and Err.
func NewEffects(saga, instance, correlation string, now time.Time) *Effects {
	if correlation == "" {
		correlation = saga + "." + instance
	}
	return &Effects{saga: saga, instance: instance, correlation: correlation, now: now,
		timeouts: map[string]time.Time{}, cleared: map[string]bool{}}
}

// Instance is the id of the instance being handled.
func (fx *Effects) Instance() string { return fx.instance }

// Now is when the input is handled.
func (fx *Effects) Now() time.Time { return fx.now }

// Send sends cmd as the instance's step: its id becomes
// CommandID(saga, instance, step), so one step sends one command however
// often it is decided, and its answer comes back as a KindResult input
// with Step set. Type, aggregate and payload are cmd's.
func (fx *Effects) Send(step string, cmd commands.Command) {
	if err := validPart("step", step); err != nil {
		fx.errs = append(fx.errs, err)
		return
	}
	cmd.ID = CommandID(fx.saga, fx.instance, step)
	cmd.CorrelationID = fx.correlation
	cmd.IssuedAt = fx.now
	if err := cmd.Validate(); err != nil {
		fx.errs = append(fx.errs, fmt.Errorf("step %s: %w", step, err))
		return
	}
	fx.sends = append(fx.sends, cmd)
}

// Cancel makes sure the command of step, sent to the aggregate ref, never
// takes effect if it has not yet: it records a refusal (status rejected,
// reason) under the command's id on ref, unless the command was answered
// already. Either way the step's answer comes back as a KindResult input:
// the refusal when the cancel won, the earlier answer when it did not
// (an accepted command stays accepted).
func (fx *Effects) Cancel(step string, ref eventstore.Ref, reason string) {
	if err := validPart("step", step); err != nil {
		fx.errs = append(fx.errs, err)
		return
	}
	if ref.Type == "" || ref.ID == "" {
		fx.errs = append(fx.errs, &eventstore.ValidationError{Field: "cancel " + step, Reason: "names no aggregate"})
		return
	}
	fx.cancels = append(fx.cancels, Cancellation{CommandID: CommandID(fx.saga, fx.instance, step), AggregateType: ref.Type, AggregateID: ref.ID,
		Reason: reason, CorrelationID: fx.correlation})
}

// After sets the timeout name to fall due d from now (replacing an
// earlier one of the same name); it comes back as a KindTimeout input.
// Timeouts are stored with the state, so they survive restarts.
func (fx *Effects) After(name string, d time.Duration) {
	if err := validPart("timeout", name); err != nil {
		fx.errs = append(fx.errs, err)
		return
	}
	delete(fx.cleared, name)
	fx.timeouts[name] = fx.now.Add(d)
}

// Clear removes the timeout name, if set.
func (fx *Effects) Clear(name string) {
	delete(fx.timeouts, name)
	fx.cleared[name] = true
}

// Finish ends the instance with outcome (e.g. "completed"): its pending
// timeouts are removed and later inputs are skipped. Effects recorded for
// this input still run.
func (fx *Effects) Finish(outcome string) {
	if outcome == "" {
		fx.errs = append(fx.errs, &eventstore.ValidationError{Field: "outcome", Reason: "is empty"})
		return
	}
	fx.outcome = outcome
}

// Commands are the commands Send recorded, with their derived ids.
func (fx *Effects) Commands() []commands.Command { return fx.sends }

// Cancellations are the cancels Cancel recorded.
func (fx *Effects) Cancellations() []Cancellation { return fx.cancels }

// Timeouts are the timeouts After set, by name, with their due times.
func (fx *Effects) Timeouts() map[string]time.Time { return fx.timeouts }

// Cleared are the timeouts Clear removed (and After did not set again
// since), sorted.
func (fx *Effects) Cleared() []string {
	out := make([]string, 0, len(fx.cleared))
	for name := range fx.cleared {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Outcome is what Finish recorded ("" while the instance runs on).
func (fx *Effects) Outcome() string { return fx.outcome }

// Err reports what Handle recorded wrongly, an *InvalidEffectError (a bug
// of the saga: permanent).
func (fx *Effects) Err() error {
	if len(fx.errs) == 0 {
		return nil
	}
	return &InvalidEffectError{Saga: fx.saga, Instance: fx.instance, Err: errors.Join(fx.errs...)}
}

// InvalidEffectError says a saga's Handle asked for something invalid (a
// bad step name, an invalid command): a bug in the saga, so permanent.
type InvalidEffectError struct {
	Saga, Instance string
	Err            error
}

func (e *InvalidEffectError) Error() string {
	return fmt.Sprintf("saga %s instance %s: invalid effect: %v", e.Saga, e.Instance, e.Err)
}

// Unwrap returns the invalid effects' errors.
func (e *InvalidEffectError) Unwrap() error { return e.Err }

// Permanent marks the error permanent (see eventstore.IsPermanent).
func (e *InvalidEffectError) Permanent() bool { return true }
