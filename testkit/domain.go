package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
)

// DomainFixture is a given/when/then fixture for one commands.Domain. It
// builds the domain's real command handlers (Domain.NewHandlers) on an
// in-memory event store (eventstore/memstore) and dispatches commands
// through a commands.Dispatcher, as the write side does:
//
//	f := testkit.NewDomainFixture(t, bankaccount.Domain())
//	f.Given("acc-1", bankaccount.Opened("acc-1")).
//		When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -50}).
//		ThenEvents(bankaccount.Transacted("rent", -50)).
//		ThenOutbound(testkit.Outbound(bankaccount.OutboundAccountOverdrawn, bankaccount.AccountOverdrawnData{AccountID: "acc-1"}))
//
// Given and When may be called again after the checks: each When adds to
// the aggregates' history, and the checks look at the latest When. A
// fixture is meant for one test goroutine.
type DomainFixture struct {
	t          testing.TB
	domain     commands.Domain
	schema     eventstore.Schema
	store      *recorder
	dispatcher *commands.Dispatcher
	recalc     commands.RecalculateFunc

	ran      bool
	cmd      commands.Command
	res      commands.Result
	err      error
	invalid  *commands.InvalidError // the cause of an invalid answer
	events   []eventstore.Envelope
	outbound []eventstore.Outbound
}

// DomainOption configures a DomainFixture.
type DomainOption func(*domainConfig)

type domainConfig struct {
	upcasters *eventstore.Upcasters
}

// WithUpcasters gives the fixture's store and handlers the domain's
// upcasters (as eventpipe's catalogue does), so that given events of an
// old schema version are read upcast and new events get the current one.
func WithUpcasters(u *eventstore.Upcasters) DomainOption {
	return func(c *domainConfig) { c.upcasters = u }
}

// NewDomainFixture builds d's command handlers on a new in-memory store
// holding d's event types. It fails the test if d is unusable.
func NewDomainFixture(t testing.TB, d commands.Domain, opts ...DomainOption) *DomainFixture {
	t.Helper()
	var cfg domainConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	schema := eventstore.Schema{Types: d.EventTypes, Upcasters: cfg.upcasters}
	mem, err := memstore.New(memstore.Config{Schema: schema})
	if err != nil {
		t.Fatalf("testkit: domain %s: in-memory store: %v", d.AggregateType, err)
	}
	store := &recorder{Store: mem}
	handlers, err := d.NewHandlers(store, cfg.upcasters)
	if err != nil {
		t.Fatalf("testkit: domain %s: build the command handlers: %v", d.AggregateType, err)
	}
	var reg commands.Registry
	if err := reg.Register(handlers...); err != nil {
		t.Fatalf("testkit: domain %s: %v", d.AggregateType, err)
	}
	dispatcher, err := commands.NewDispatcher(commands.DispatcherConfig{Registry: &reg, Outcomes: store, Replies: discard{}})
	if err != nil {
		t.Fatalf("testkit: domain %s: %v", d.AggregateType, err)
	}
	f := &DomainFixture{t: t, domain: d, schema: schema, store: store, dispatcher: dispatcher}
	if d.NewRecalculate != nil {
		if f.recalc, err = d.NewRecalculate(store, commands.RecalculateOptions{Retries: -1}); err != nil {
			t.Fatalf("testkit: domain %s: build the recalculation: %v", d.AggregateType, err)
		}
	}
	return f
}

// ctx is the context of the fixture's calls.
func (f *DomainFixture) ctx() context.Context { return f.t.Context() }

func (f *DomainFixture) ref(id string) eventstore.Ref {
	return eventstore.Ref{Type: f.domain.AggregateType, ID: id}
}

// Given appends events to aggregate id's log, after the events it holds,
// as stored history: through eventstore.Prepare and the store's Append
// with the domain's schema, without the command handlers. A domain that
// keeps a STATE item (commands.FacetDomain) then has it recalculated from
// the log by its own rules (Domain.NewRecalculate), so the handlers load the
// aggregate exactly as in production. History the rules refuse fails the
// test. eventstore.Event builds an event from a payload value.
func (f *DomainFixture) Given(id string, events ...eventstore.NewEvent) *DomainFixture {
	f.t.Helper()
	if len(events) == 0 {
		return f
	}
	ref := f.ref(id)
	version, err := f.store.Version(f.ctx(), ref)
	if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
		f.t.Fatalf("testkit: Given %s: version: %v", ref, err)
	}
	req, err := eventstore.Prepare(ref, version, eventstore.Change{Events: events}, f.schema)
	if err != nil {
		f.t.Fatalf("testkit: Given %s: %v", ref, err)
	}
	if _, err := f.store.Store.Append(f.ctx(), req); err != nil {
		f.t.Fatalf("testkit: Given %s: append: %v", ref, err)
	}
	if f.recalc != nil {
		if _, err := f.recalc(f.ctx(), id); err != nil {
			f.t.Fatalf("testkit: Given %s: the domain's rules refuse the given history:\n%v\ngiven:\n%s", ref, err, renderNew(events))
		}
	}
	return f
}

// When dispatches a new command of commandType to aggregate id, with
// payload (JSON text, or a value to encode), and records its answer, the
// events it appended and the outbound events published with them.
func (f *DomainFixture) When(id, commandType string, payload any) *DomainFixture {
	f.t.Helper()
	raw, err := rawJSON(payload)
	if err != nil {
		f.t.Fatalf("testkit: When %s on %s: payload: %v", commandType, f.ref(id), err)
	}
	return f.WhenCommand(commands.New(commandType, f.domain.AggregateType, id, raw))
}

// WhenCommand is When for a command built by the caller (with an
// ExpectedVersion, an Actor, its own id). An empty ID or aggregate type
// is filled in.
func (f *DomainFixture) WhenCommand(cmd commands.Command) *DomainFixture {
	f.t.Helper()
	if cmd.ID == "" {
		fresh := commands.New(cmd.Type, cmd.AggregateType, cmd.AggregateID, cmd.Payload)
		cmd.ID, cmd.IssuedAt = fresh.ID, fresh.IssuedAt
		if cmd.CorrelationID == "" {
			cmd.CorrelationID = fresh.CorrelationID
		}
	}
	if cmd.AggregateType == "" {
		cmd.AggregateType = f.domain.AggregateType
	}
	f.store.take()
	f.ran, f.cmd = true, cmd
	f.res, f.err = f.dispatcher.Dispatch(f.ctx(), cmd)
	f.invalid = nil
	if errors.As(f.err, &f.invalid) {
		f.err = nil // an answer (StatusInvalid), not a failure
	}
	f.events, f.outbound = f.store.take()
	return f
}

// Result is the answer to the latest When.
func (f *DomainFixture) Result() commands.Result { return f.res }

// Err is the error the latest When failed with (not an answer: the
// dispatcher would retry the command), or nil.
func (f *DomainFixture) Err() error { return f.err }

// Events are the events the latest When appended.
func (f *DomainFixture) Events() []eventstore.Envelope { return f.events }

// Store is the fixture's in-memory store.
func (f *DomainFixture) Store() eventstore.Store { return f.store }

// Log returns every event aggregate id holds, in order (none when it has
// no event): for a FoldFixture's GivenEnvelopes, for instance.
func (f *DomainFixture) Log(id string) []eventstore.Envelope {
	f.t.Helper()
	events, err := f.store.Load(f.ctx(), f.ref(id), 0)
	if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
		f.t.Fatalf("testkit: load %s: %v", f.ref(id), err)
	}
	return events
}

// answered checks that When ran and did not fail; it returns false (the
// test marked failed) otherwise.
func (f *DomainFixture) answered() bool {
	f.t.Helper()
	if !f.ran {
		f.t.Fatal("testkit: a Then check before any When")
	}
	if f.err != nil {
		f.t.Errorf("%s\nthe command failed (no answer): %v", f.describe(), f.err)
		return false
	}
	return true
}

// describe renders the latest command and its answer.
func (f *DomainFixture) describe() string {
	ans := string(f.res.Status)
	if f.res.Status == commands.StatusAccepted {
		ans += fmt.Sprintf(" at version %d", f.res.Version)
	} else if f.res.Reason != "" {
		ans += ": " + f.res.Reason
	}
	if f.err != nil {
		ans = "no answer"
	}
	return fmt.Sprintf("when %s on %s/%s with %s\nanswered %s", f.cmd.Type, f.cmd.AggregateType, f.cmd.AggregateID, compact(f.cmd.Payload), ans)
}

// ThenAccepted checks that the command was accepted.
func (f *DomainFixture) ThenAccepted() *DomainFixture {
	f.t.Helper()
	if f.answered() && f.res.Status != commands.StatusAccepted {
		f.t.Errorf("%s\nwant accepted", f.describe())
	}
	return f
}

// ThenEvents checks that the command was accepted and appended exactly
// want, in order: types equal and payloads equal as JSON.
func (f *DomainFixture) ThenEvents(want ...eventstore.NewEvent) *DomainFixture {
	f.t.Helper()
	if !f.answered() {
		return f
	}
	if f.res.Status != commands.StatusAccepted {
		f.t.Errorf("%s\nwant accepted with events:\n%s", f.describe(), renderNew(want))
		return f
	}
	if w, g := renderNew(want), renderStored(f.events); w != g {
		f.t.Errorf("%s\n%s", f.describe(), mismatch("events", w, g))
	}
	return f
}

// ThenNoEvents checks that the command appended nothing, whatever its
// answer.
func (f *DomainFixture) ThenNoEvents() *DomainFixture {
	f.t.Helper()
	if f.answered() && len(f.events) > 0 {
		f.t.Errorf("%s\nwant no events, got:\n%s", f.describe(), renderStored(f.events))
	}
	return f
}

// ThenRefused checks that the command was answered status (rejected,
// conflict, not_found or invalid) with a reason containing reason (any
// reason when it is empty), and that it appended nothing.
func (f *DomainFixture) ThenRefused(status commands.Status, reason string) *DomainFixture {
	f.t.Helper()
	if !f.answered() {
		return f
	}
	want := string(status)
	if reason != "" {
		want += " with a reason containing " + fmt.Sprintf("%q", reason)
	}
	switch {
	case status == commands.StatusAccepted:
		f.t.Fatal("testkit: ThenRefused(accepted): use ThenAccepted or ThenEvents")
	case f.res.Status != status || !strings.Contains(f.res.Reason, reason):
		f.t.Errorf("%s\nwant %s", f.describe(), want)
	case len(f.events) > 0:
		f.t.Errorf("%s\nwant nothing appended by a refused command, got:\n%s", f.describe(), renderStored(f.events))
	}
	return f
}

// ThenRejected is ThenRefused(commands.StatusRejected, reason): the
// domain's decision or rules refused the command.
func (f *DomainFixture) ThenRejected(reason string) *DomainFixture {
	f.t.Helper()
	return f.ThenRefused(commands.StatusRejected, reason)
}

// Refusal is the latest When's refusal as an error, nil when it was
// accepted: for an invalid command the dispatcher's *commands.InvalidError
// (wrapping the cause: an *eventstore.ValidationError,
// commands.ErrUnknownCommand, …), for any other refusal Result.Err (a
// *commands.RefusalError matching its eventstore.Code). Match it with
// errors.Is and errors.As.
func (f *DomainFixture) Refusal() error {
	if f.res.Status == commands.StatusInvalid && f.invalid != nil {
		return f.invalid
	}
	return f.res.Err()
}

// ThenRefusedWith checks that the command was answered status, that its
// refusal matches target with errors.Is (an eventstore.Code the domain
// declares, commands.ErrUnknownCommand, …) and that it appended nothing.
func (f *DomainFixture) ThenRefusedWith(status commands.Status, target error) *DomainFixture {
	f.t.Helper()
	if !f.answered() {
		return f
	}
	switch {
	case status == commands.StatusAccepted:
		f.t.Fatal("testkit: ThenRefusedWith(accepted): use ThenAccepted or ThenEvents")
	case f.res.Status != status || !errors.Is(f.Refusal(), target):
		f.t.Errorf("%s\nwant %s matching %q (errors.Is), got %v", f.describe(), status, target, f.Refusal())
	case len(f.events) > 0:
		f.t.Errorf("%s\nwant nothing appended by a refused command, got:\n%s", f.describe(), renderStored(f.events))
	}
	return f
}

// ThenInvalid checks that the command was answered invalid because of
// its input field (the Field of the *eventstore.ValidationError it was
// refused with, found with errors.As; "payload" for a payload that does
// not decode strictly), and that it appended nothing.
func (f *DomainFixture) ThenInvalid(field string) *DomainFixture {
	f.t.Helper()
	if !f.answered() {
		return f
	}
	var ve *eventstore.ValidationError
	switch {
	case f.res.Status != commands.StatusInvalid || !errors.As(f.Refusal(), &ve) || ve.Field != field:
		f.t.Errorf("%s\nwant invalid with an *eventstore.ValidationError on %q, got %v", f.describe(), field, f.Refusal())
	case len(f.events) > 0:
		f.t.Errorf("%s\nwant nothing appended by a refused command, got:\n%s", f.describe(), renderStored(f.events))
	}
	return f
}

// OutboundEvent is an outbound event a rule publishes (see
// eventstore.Outbox): its name and payload.
type OutboundEvent struct {
	Name    string
	Payload any
}

// Outbound returns the outbound event name with payload (JSON text, or a
// value to encode), for ThenOutbound.
func Outbound(name string, payload any) OutboundEvent {
	return OutboundEvent{Name: name, Payload: payload}
}

// Outbound are the outbound events the latest When published, in order.
func (f *DomainFixture) Outbound() []OutboundEvent {
	out := make([]OutboundEvent, len(f.outbound))
	for i, o := range f.outbound {
		out[i] = OutboundEvent{Name: o.Name, Payload: o.Payload}
	}
	return out
}

// ThenOutbound checks that the command's events published exactly want,
// in order: names equal and payloads equal as JSON.
func (f *DomainFixture) ThenOutbound(want ...OutboundEvent) *DomainFixture {
	f.t.Helper()
	if !f.answered() {
		return f
	}
	if w, g := renderOutbound(want), renderOutbound(f.Outbound()); w != g {
		f.t.Errorf("%s\n%s", f.describe(), mismatch("outbound events", w, g))
	}
	return f
}

// ThenNoOutbound checks that the command published no outbound event.
func (f *DomainFixture) ThenNoOutbound() *DomainFixture {
	f.t.Helper()
	return f.ThenOutbound()
}

// ThenState checks the STATE item of aggregate id (kept by a facet
// domain) against want, as JSON.
func (f *DomainFixture) ThenState(id string, want any) *DomainFixture {
	f.t.Helper()
	st, err := f.store.State(f.ctx(), f.ref(id))
	if err != nil {
		f.t.Errorf("testkit: STATE of %s: %v", f.ref(id), err)
		return f
	}
	if w, g := pretty(want), pretty(st.Data); w != g {
		what := fmt.Sprintf("STATE of %s at version %d", f.ref(id), st.Seq)
		if f.ran {
			f.t.Errorf("%s\n%s", f.describe(), mismatch(what, w, g))
		} else {
			f.t.Errorf("%s", mismatch(what, w, g))
		}
	}
	return f
}

// renderNew renders events to append, one block per event.
func renderNew(events []eventstore.NewEvent) string {
	if len(events) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "event %d: %s\n%s\n", i+1, e.Type, pretty(e.Payload))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// renderStored renders stored events like renderNew.
func renderStored(events []eventstore.Envelope) string {
	ne := make([]eventstore.NewEvent, len(events))
	for i, e := range events {
		ne[i] = eventstore.NewEvent{Type: e.EventType, Payload: e.Payload}
	}
	return renderNew(ne)
}

// renderOutbound renders outbound events, one block each.
func renderOutbound(events []OutboundEvent) string {
	if len(events) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "outbound %d: %s\n%s\n", i+1, e.Name, pretty(e.Payload))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// compact renders JSON on one line (as it is when it is not JSON).
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// recorder is the fixture's store: it records what each append by the
// handlers wrote, so that When can report the events and the outbound
// events of its command.
type recorder struct {
	eventstore.Store
	mu       sync.Mutex
	events   []eventstore.Envelope
	outbound []eventstore.Outbound
}

// Append implements eventstore.Store, recording what it wrote.
func (r *recorder) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	res, err := r.Store.Append(ctx, req)
	if err == nil && !res.Duplicate {
		r.mu.Lock()
		r.events = append(r.events, req.Events...)
		r.outbound = append(r.outbound, req.Outbound...)
		r.mu.Unlock()
	}
	return res, err
}

// take returns what was appended since the last take and forgets it.
func (r *recorder) take() ([]eventstore.Envelope, []eventstore.Outbound) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, o := r.events, r.outbound
	r.events, r.outbound = nil, nil
	return e, o
}

// discard is the dispatcher's replies publisher: Dispatch publishes
// nothing, so nothing reaches it.
type discard struct{}

func (discard) Publish(string, ...*message.Message) error { return nil }
func (discard) Close() error                              { return nil }
