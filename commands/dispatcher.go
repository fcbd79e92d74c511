package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/tracing"
)

// ErrUnknownCommand is wrapped when no handler is registered for a
// command's type (or the type belongs to another aggregate type).
var ErrUnknownCommand = errors.New("unknown command type")

// Registry maps command types to their handlers. Build it at start-up;
// it is read-only afterwards and safe for concurrent reads.
type Registry struct {
	handlers map[string]Handler
}

// Register adds handlers; a command type registered twice is an error.
func (r *Registry) Register(hs ...Handler) error {
	if r.handlers == nil {
		r.handlers = map[string]Handler{}
	}
	for _, h := range hs {
		if _, dup := r.handlers[h.CommandType()]; dup {
			return fmt.Errorf("commands: command type %q registered twice", h.CommandType())
		}
		r.handlers[h.CommandType()] = h
	}
	return nil
}

// Lookup returns the handler of commandType.
func (r *Registry) Lookup(commandType string) (Handler, bool) {
	h, ok := r.handlers[commandType]
	return h, ok
}

func (r *Registry) hasAggregateType(aggregateType string) bool {
	for _, h := range r.handlers {
		if h.AggregateType() == aggregateType {
			return true
		}
	}
	return false
}

// AggregateTypes returns the aggregate types that have handlers, sorted:
// the dispatcher subscribes to one commands topic per aggregate type.
func (r *Registry) AggregateTypes() []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range r.handlers {
		if !seen[h.AggregateType()] {
			seen[h.AggregateType()] = true
			out = append(out, h.AggregateType())
		}
	}
	sort.Strings(out)
	return out
}

// CommandTypes returns the registered command types, sorted.
func (r *Registry) CommandTypes() []string {
	out := make([]string, 0, len(r.handlers))
	for t := range r.handlers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// OutcomeRecorder records the final answer to a command that appended
// nothing, under its command id, so that every delivery of the command
// gets the same answer. eventstore.Store implements it (RecordRefusal).
type OutcomeRecorder interface {
	RecordRefusal(ctx context.Context, ref eventstore.Ref, commandID string, r eventstore.Refusal) (eventstore.AppendResult, error)
}

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	// Registry holds the handlers. Required.
	Registry *Registry
	// Signed reserves command ids (the sagas') for commands signed with
	// the deployment's command key (key id DeploymentKeyID): such a
	// command without a valid signature is invalid (ErrReservedID),
	// answered and poisoned without being recorded, so it cannot take
	// the id from the saga. Signed.Key also verifies every command signed
	// under DeploymentKeyID. The zero SignedIDs reserves nothing.
	Signed SignedIDs
	// Keys are the producers' keys, by key id: a command from the bus
	// signed with one (Signer.SignMessage) has its actor recorded as
	// verified (eventstore.ActorSigned), and its answer is signed
	// (Result.Signature). A command whose signature does not verify (an
	// unknown key id, a command changed after signing) is refused with
	// ErrBadSignature whether or not signatures are required.
	Keys Keys
	// RequireSigned refuses every command from the bus that is not
	// signed with Keys or the deployment's key (ErrUnsigned): answered
	// invalid, poisoned, nothing recorded. False (the default): an
	// unsigned command runs and its actor is recorded as claimed
	// (eventstore.ActorClaimed). The HTTP API's commands (Dispatch,
	// DispatchFresh) are not concerned: their actor is the verified
	// token's.
	RequireSigned bool
	// Outcomes records refusals (usually the handlers' event store).
	// Required.
	Outcomes OutcomeRecorder
	// Replies publishes results on Topics.Replies(), or the replies
	// topic and partition a command names (MetadataReplyTo,
	// MetadataReplyPartition). Required.
	Replies message.Publisher
	// Topics is the topic namespace (default: the default namespace).
	Topics bus.Topics
	// Sealer opens the personal fields a sender sealed in a command's
	// payload before its handler decides (eventstore.CommandSealer;
	// eventpipe's write side passes its store's privacy.Sealer). A
	// forgotten subject's command is rejected with
	// privacy.CodeForgotten, one whose sealed values do not open is
	// invalid. Nil: payloads are decided as they arrive.
	Sealer eventstore.CommandSealer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Dispatcher runs commands through their handlers and publishes each
// result on the replies topic. Safe for concurrent use.
type Dispatcher struct {
	cfg DispatcherConfig
}

func (c *DispatcherConfig) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing or invalid field.
func (c DispatcherConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("commands: DispatcherConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Registry == nil || len(c.Registry.handlers) == 0:
		return bad("Registry", "has no handlers")
	case c.Replies == nil:
		return bad("Replies", "is nil")
	case c.Outcomes == nil:
		return bad("Outcomes", "is nil")
	case len(c.Signed.Key) > 0 && len(c.Signed.Key) < MinKeyLength:
		return bad("Signed.Key", "has %d bytes, want at least %d", len(c.Signed.Key), MinKeyLength)
	case c.RequireSigned && len(c.Keys) == 0 && len(c.Signed.Key) == 0:
		return bad("RequireSigned", "no key to verify with: set Keys or Signed.Key")
	}
	if err := c.Keys.Validate(); err != nil {
		return fmt.Errorf("commands: DispatcherConfig: %w", err)
	}
	return nil
}

// NewDispatcher validates cfg.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Dispatcher{cfg: cfg}, nil
}

// Dispatch handles one command in-process (the HTTP API uses it) and
// returns its result without publishing it.
//
// A command's answer is decided once. An accepted command's id is
// recorded in its append's transaction; every other final answer
// (rejected, not found, conflict, invalid) is recorded under the command
// id before it is returned, and whichever delivery records first wins: a
// redelivery, on any process, returns the recorded answer with Duplicate
// set instead of deciding again against newer state. The one exception is
// a command whose envelope names no aggregate that could hold a record
// (empty or malformed ids, an aggregate type without handlers): it is
// StatusInvalid from the message alone, the same on every delivery.
//
// An invalid command returns an error wrapping *InvalidError (and
// ErrUnknownCommand for an unknown type) beside its StatusInvalid result;
// any other error means "try again later" and nothing was answered.
//
// Dispatch runs in a span "command <type>", a child of ctx's span; the
// events it appends store that span's context (package tracing).
func (d *Dispatcher) Dispatch(ctx context.Context, cmd Command) (res Result, err error) {
	ctx, span := tracing.Tracer().Start(ctx, "command "+cmd.Type, trace.WithAttributes(
		attribute.String("eventpipe.command.id", cmd.ID), attribute.String("eventpipe.aggregate", cmd.AggregateType+"/"+cmd.AggregateID)))
	defer func() {
		span.SetAttributes(attribute.String("eventpipe.command.status", string(res.Status)))
		tracing.RecordFailure(span, err)
		span.End()
	}()
	return d.dispatch(ctx, cmd, true)
}

// DispatchFresh is Dispatch for a command whose id was just made and is
// never sent again, such as a synchronous HTTP request's: no redelivery
// can ask for its answer, so a refusal (invalid, rejected, not found,
// conflict) is returned without being recorded, and a command that is not
// accepted writes nothing. An accepted command's id is still recorded in
// its append's transaction. Commands that may be delivered again (the
// bus, a client's own command id) go through Dispatch.
func (d *Dispatcher) DispatchFresh(ctx context.Context, cmd Command) (res Result, err error) {
	ctx, span := tracing.Tracer().Start(ctx, "command "+cmd.Type, trace.WithAttributes(
		attribute.String("eventpipe.command.id", cmd.ID), attribute.String("eventpipe.aggregate", cmd.AggregateType+"/"+cmd.AggregateID)))
	defer func() {
		span.SetAttributes(attribute.String("eventpipe.command.status", string(res.Status)))
		tracing.RecordFailure(span, err)
		span.End()
	}()
	return d.dispatch(ctx, cmd, false)
}

// dispatch is Dispatch inside the command's span; record says whether a
// refusal is recorded under the command id.
func (d *Dispatcher) dispatch(ctx context.Context, cmd Command, record bool) (Result, error) {
	res := Result{CommandID: cmd.ID, AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID}
	if err := cmd.Validate(); err != nil {
		res.Status, res.Reason = StatusInvalid, err.Error()
		return res, &InvalidError{Err: err}
	}
	h, ok := d.cfg.Registry.Lookup(cmd.Type)
	if !ok || h.AggregateType() != cmd.AggregateType {
		res.Status = StatusInvalid
		res.Reason = fmt.Sprintf("%v %q for aggregate type %q (known: %v)", ErrUnknownCommand, cmd.Type, cmd.AggregateType, d.cfg.Registry.CommandTypes())
		cause := &InvalidError{Err: fmt.Errorf("%w %q", ErrUnknownCommand, cmd.Type)}
		if !record || !d.cfg.Registry.hasAggregateType(cmd.AggregateType) {
			return res, cause
		}
		return d.record(ctx, cmd, res, cause)
	}
	if d.cfg.Sealer != nil {
		payload, err := d.cfg.Sealer.OpenCommand(ctx, eventstore.CommandRef{Aggregate: eventstore.Ref{Type: cmd.AggregateType, ID: cmd.AggregateID}, Type: cmd.Type, ID: cmd.ID}, cmd.Payload)
		var cause error
		switch {
		case err == nil:
			cmd.Payload = payload
		case errors.Is(err, privacy.ErrForgotten):
			res.Status, res.Reason, res.Code = StatusRejected, err.Error(), privacy.CodeForgotten
		case eventstore.IsPermanent(err):
			res.Status, res.Reason = StatusInvalid, err.Error()
			cause = &InvalidError{Err: err}
		default:
			return res, fmt.Errorf("open the payload of command %s: %w", cmd.ID, err)
		}
		if err != nil {
			if !record {
				return res, cause
			}
			return d.record(ctx, cmd, res, cause)
		}
	}
	res, err := h.Handle(ctx, cmd)
	var invalid *InvalidError
	switch {
	case err != nil && !errors.As(err, &invalid):
		return res, err
	case res.Status == StatusAccepted:
		return res, nil
	case res.Status == "":
		return res, fmt.Errorf("commands: handler of %s returned no status", cmd.Type)
	case !record && res.Status == StatusInvalid:
		if err == nil {
			err = &InvalidError{Err: errors.New(res.Reason)}
		}
		return res, err
	case !record:
		return res, nil
	}
	return d.record(ctx, cmd, res, err)
}

// record makes res, a refusal, the command's recorded answer, or returns
// the answer recorded before it. cause is the *InvalidError of an invalid
// result (nil otherwise); an invalid answer, fresh or recorded, is
// returned with an *InvalidError so that the message is poisoned.
func (d *Dispatcher) record(ctx context.Context, cmd Command, res Result, cause error) (Result, error) {
	ref := eventstore.Ref{Type: cmd.AggregateType, ID: cmd.AggregateID}
	prior, err := d.cfg.Outcomes.RecordRefusal(ctx, ref, cmd.ID, eventstore.Refusal{Status: string(res.Status), Reason: res.Reason, Code: res.Code, Version: res.Version})
	var refused *eventstore.RefusedCommandError
	switch {
	case errors.As(err, &refused):
		res.Status, res.Reason, res.Code, res.Version = Status(refused.Refusal.Status), refused.Refusal.Reason, refused.Refusal.Code, refused.Refusal.Version
		res.EventIDs, res.Duplicate = nil, true
	case err != nil:
		return res, fmt.Errorf("command %s: %w", cmd.ID, err)
	case prior.Duplicate:
		res.Status, res.Reason, res.Code, res.Version = StatusAccepted, "", "", prior.LastSeq
		res.EventIDs, res.Duplicate = prior.EventIDs, true
		return res, nil
	}
	if res.Status != StatusInvalid {
		return res, nil
	}
	if cause == nil {
		cause = &InvalidError{Err: errors.New(res.Reason)}
	}
	return res, cause
}

// HandleMessage is the Watermill handler for commands topics: it decodes
// the command, dispatches it, and publishes the result keyed by command
// id. Malformed messages, unknown types and invalid input publish a
// StatusInvalid result (when the command id is known) and return an
// *InvalidError, which is permanent (eventstore.IsPermanent), so the
// poison middleware parks them with the reason. Before it runs, a
// command's signature is checked (DispatcherConfig.Keys, Signed,
// RequireSigned): a refused one is answered the same way with its code
// (ErrUnsigned, ErrBadSignature, ErrReservedID) and never recorded; a
// signed one's events record their actor as eventstore.ActorSigned, an
// unsigned one's as eventstore.ActorClaimed, and the answer to a signed
// one carries Result.Signature.
// Transient failures return an error for retry and redelivery; the
// recorded answer makes a redelivered command append nothing twice and
// answer what it answered first.
func (d *Dispatcher) HandleMessage(msg *message.Message) error {
	ctx := msg.Context()
	to, rerr := d.replyRoute(msg)
	cmd, err := FromMessage(msg)
	if err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		res := Result{CommandID: msg.UUID, Status: StatusInvalid, Reason: err.Error()}
		if cmd.ID != "" {
			res.AggregateType, res.AggregateID = cmd.AggregateType, cmd.AggregateID
		}
		d.publish(res, cmd.CorrelationID, to)
		return &InvalidError{Err: err}
	}
	proof, refusal := d.verify(cmd, msg)
	if refusal != nil {
		// Answered but not recorded: the genuine command keeps its id.
		cause := error(refusal)
		if refusal.Code == ErrReservedID {
			cause = fmt.Errorf("%w: %w", refusal, ErrUnsignedReservedID)
		}
		err := &InvalidError{Err: fmt.Errorf("command %s: %w", cmd.ID, cause)}
		d.cfg.Logger.Warn("command refused for its signature", "command_id", cmd.ID, "type", cmd.Type, "aggregate", cmd.AggregateType+"/"+cmd.AggregateID,
			"key_id", msg.Metadata.Get(MetadataKeyID), "code", refusal.Code, "reason", refusal.Reason)
		if perr := d.publish(Result{CommandID: cmd.ID, AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID,
			Status: StatusInvalid, Code: refusal.Code, Reason: err.Error()}, cmd.CorrelationID, to); perr != nil {
			return perr
		}
		return err
	}
	cmd.ActorSource = eventstore.ActorClaimed
	if proof.key != nil {
		cmd.ActorSource = eventstore.ActorSigned
	}
	res, err := d.Dispatch(ctx, cmd)
	var invalid *InvalidError
	if err != nil && !errors.As(err, &invalid) {
		return fmt.Errorf("command %s (%s %s/%s): %w", cmd.ID, cmd.Type, cmd.AggregateType, cmd.AggregateID, err)
	}
	if proof.key != nil {
		res.Signature = SignResult(proof.key, proof.signature, res)
	}
	if perr := d.publish(res, cmd.CorrelationID, to); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	d.cfg.Logger.Debug("command handled", "command_id", cmd.ID, "type", cmd.Type, "aggregate", cmd.AggregateID,
		"status", res.Status, "version", res.Version, "duplicate", res.Duplicate)
	return nil
}

// proof is a command's verified signature and the key it was made with
// (nil key: the command is unsigned).
type proof struct {
	key       []byte
	signature string
}

// verify checks cmd's signature, carried by msg: a valid one returns its
// proof; an unsigned command the zero proof, unless signatures are
// required or its id is reserved; anything else the refusal (a
// *RefusalError with its code).
func (d *Dispatcher) verify(cmd Command, msg *message.Message) (proof, *RefusalError) {
	keyID, sig := msg.Metadata.Get(MetadataKeyID), msg.Metadata.Get(MetadataSignature)
	reserved := d.cfg.Signed.Reserved(cmd.ID)
	refuse := func(code eventstore.Code, reason string) (proof, *RefusalError) {
		return proof{}, &RefusalError{Status: StatusInvalid, Code: code, Reason: reason}
	}
	if sig == "" && keyID == "" {
		switch {
		case reserved:
			return refuse(ErrReservedID, "the id is a saga's")
		case d.cfg.RequireSigned:
			return refuse(ErrUnsigned, "the command handlers require signed commands and this one is not signed")
		}
		return proof{}, nil
	}
	key := d.cfg.Keys[keyID]
	if keyID == DeploymentKeyID {
		key = d.cfg.Signed.Key
	}
	switch {
	case len(key) == 0:
		return refuse(ErrBadSignature, fmt.Sprintf("signed with key %q, which the command handlers do not hold", keyID))
	case !VerifyCommand(key, cmd, msg.Metadata.Get(MetadataReplyTo), sig):
		return refuse(ErrBadSignature, fmt.Sprintf("the signature (key %q) does not match the command: it was changed after it was signed, or signed with another key", keyID))
	case reserved && keyID != DeploymentKeyID:
		return refuse(ErrReservedID, fmt.Sprintf("the id is a saga's and key %q is a producer's", keyID))
	}
	return proof{key: key, signature: sig}, nil
}

// replyTo is where a command's answer goes: a replies topic and, when
// the sender asked for one, a partition ("" for the key's).
type replyTo struct{ topic, partition string }

// replyRoute reads the command message's reply_to and reply_partition.
// A bad value is a *eventstore.ValidationError, and the answer saying so
// goes to the default replies topic, on the key's partition.
func (d *Dispatcher) replyRoute(msg *message.Message) (replyTo, error) {
	def := replyTo{topic: d.cfg.Topics.Replies()}
	to := def
	if t := msg.Metadata.Get(MetadataReplyTo); t != "" {
		if !d.cfg.Topics.ReplyTopic(t) {
			return def, &eventstore.ValidationError{Field: MetadataReplyTo,
				Reason: fmt.Sprintf("%q is not %s or %s.<group> (group: 1–200 of [A-Za-z0-9._-])", t, def.topic, def.topic)}
		}
		to.topic = t
	}
	if p := msg.Metadata.Get(MetadataReplyPartition); p != "" {
		if n, err := strconv.ParseInt(p, 10, 32); err != nil || n < 0 || strconv.FormatInt(n, 10) != p {
			return def, &eventstore.ValidationError{Field: MetadataReplyPartition, Reason: fmt.Sprintf("%q is not a partition number", p)}
		}
		to.partition = p
	}
	return to, nil
}

func (d *Dispatcher) publish(res Result, correlationID string, to replyTo) error {
	if res.CommandID == "" {
		return nil
	}
	msg, err := res.ToMessage(correlationID)
	if err != nil {
		return err
	}
	if to.partition != "" {
		msg.Metadata.Set(bus.MetadataPartition, to.partition)
	}
	if err := d.cfg.Replies.Publish(to.topic, msg); err != nil {
		return fmt.Errorf("publish result of %s to %s: %w", res.CommandID, to.topic, err)
	}
	return nil
}

// Topics returns the commands topics the dispatcher consumes.
func (d *Dispatcher) Topics() []string {
	var out []string
	for _, t := range d.cfg.Registry.AggregateTypes() {
		out = append(out, d.cfg.Topics.Commands(t))
	}
	return out
}
