package testkit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

// Epoch is when every fixture's clock starts: 2025-01-01T00:00:00Z. A
// saga fixture handles inputs at its clock; a fold fixture stamps its
// n-th event (from 0) Epoch + n seconds.
func Epoch() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }

// SagaFixture is a given/when/then fixture for a saga. It steps the
// saga's pure core (sagas.Pure: Route, Initial, Handle and Abort, with
// the Effects the Runner gives them) and keeps in memory what the Runner
// keeps in Postgres: each instance's state and outcome, its pending
// timeouts and the commands its steps sent. A finished instance, an
// input no instance takes and a repeated input id are skipped, as the
// Runner skips them.
//
//	f := testkit.NewSagaFixture(t, transfersaga.New(transfersaga.Config{}))
//	f.Given(testkit.SagaEvent(transfer.AggregateType, "t1", transfer.TransferRequested, transfer.RequestedData{From: "a", To: "b", Amount: 5}),
//		testkit.Accepted(transfersaga.StepDebit)).
//		When(testkit.Answer(transfersaga.StepCredit, commands.StatusRejected, "account closed")).
//		ThenCommands(testkit.Sent(transfersaga.StepRefund, bankaccount.RecordTransaction, bankaccount.AggregateType, "a", ...)).
//		ThenRunning()
//
// The clock starts at Epoch and moves only when a timeout fires (to its
// due time) or Advance moves it.
type SagaFixture struct {
	t         testing.TB
	saga      sagas.Pure
	now       time.Time
	instances map[string]*sagaInstance
	seen      map[string]bool
	seqs      map[eventstore.Ref]int64
	inputs    int

	ran  bool
	last sagaStep
}

// sagaInstance is what the Runner keeps of one instance.
type sagaInstance struct {
	state    json.RawMessage
	outcome  string
	timeouts map[string]time.Time
	targets  map[string]eventstore.Ref // by step: where its command went (sent or cancelled)
}

// sagaStep is what one input did.
type sagaStep struct {
	desc     string
	instance string
	skipped  string // why, when the input was skipped
	err      error
	fx       *sagas.Effects
}

// NewSagaFixture validates saga (a sagas.Saga[S]) and returns its
// fixture. It fails the test if the saga is unusable.
func NewSagaFixture(t testing.TB, saga sagas.Definition) *SagaFixture {
	t.Helper()
	p, err := sagas.PureOf(saga)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return &SagaFixture{t: t, saga: p, now: Epoch(), instances: map[string]*sagaInstance{}, seen: map[string]bool{}, seqs: map[eventstore.Ref]int64{}}
}

// SagaInput is an input for a SagaFixture, built by SagaEvent,
// SagaEnvelope, SagaOutbound, Answer, Accepted, Fire or Abort. The
// inputs that concern a running instance (answers, timeouts, aborts) go
// to the fixture's only instance unless On names another.
type SagaInput struct {
	desc     string
	instance string
	build    func(f *SagaFixture, instance string) (sagas.Input, error)
	routed   bool // an event or outbound input: Route names the instance
}

// On returns in addressed to instance.
func (in SagaInput) On(instance string) SagaInput {
	in.instance = instance
	return in
}

// String describes the input.
func (in SagaInput) String() string {
	if in.instance != "" {
		return in.desc + " on instance " + in.instance
	}
	return in.desc
}

// SagaEvent is an event of aggregate aggregateType/aggregateID, of
// eventType with payload (JSON text, or a value to encode), as the relay
// delivers it: a new event id, the aggregate's next sequence in this
// fixture, the fixture's clock as its time.
func SagaEvent(aggregateType, aggregateID, eventType string, payload any) SagaInput {
	return SagaInput{desc: fmt.Sprintf("event %s of %s/%s", eventType, aggregateType, aggregateID), routed: true,
		build: func(f *SagaFixture, _ string) (sagas.Input, error) {
			raw, err := rawJSON(payload)
			if err != nil {
				return sagas.Input{}, err
			}
			ref := eventstore.Ref{Type: aggregateType, ID: aggregateID}
			f.seqs[ref]++
			e := eventstore.Envelope{EventID: eventstore.NewEventID(f.now), AggregateType: aggregateType, AggregateID: aggregateID,
				Sequence: f.seqs[ref], EventType: eventType, SchemaVersion: 1, OccurredAt: f.now, Payload: raw}
			return eventInput(e), nil
		}}
}

// SagaEnvelope is the stored event e as an input (for instance an event
// a DomainFixture appended: DomainFixture.Events).
func SagaEnvelope(e eventstore.Envelope) SagaInput {
	return SagaInput{desc: "event " + e.String(), routed: true,
		build: func(*SagaFixture, string) (sagas.Input, error) { return eventInput(e), nil }}
}

func eventInput(e eventstore.Envelope) sagas.Input {
	return sagas.Input{ID: "event:" + e.EventID, Kind: sagas.KindEvent, Event: e, CorrelationID: e.Metadata.CorrelationID}
}

// SagaOutbound is the outbound event name with payload (JSON text, or a
// value to encode) published by aggregate aggregateType/aggregateID.
func SagaOutbound(name, aggregateType, aggregateID string, payload any) SagaInput {
	return SagaInput{desc: fmt.Sprintf("outbound %s of %s/%s", name, aggregateType, aggregateID), routed: true,
		build: func(f *SagaFixture, _ string) (sagas.Input, error) {
			raw, err := rawJSON(payload)
			if err != nil {
				return sagas.Input{}, err
			}
			id := eventstore.NewEventID(f.now)
			o := eventstore.OutboundRecord{ID: id, Name: name, AggregateType: aggregateType, AggregateID: aggregateID,
				OccurredAt: f.now, Payload: raw}
			return sagas.Input{ID: "outbound:" + id, Kind: sagas.KindOutbound, Outbound: o}, nil
		}}
}

// Answer is the answer status (with reason) to the command the
// instance's step sent, or cancelled: a KindResult input as the Runner
// hands it over once verified. The step must have sent or cancelled a
// command.
func Answer(step string, status commands.Status, reason string) SagaInput {
	desc := fmt.Sprintf("answer %s to step %s", status, step)
	if reason != "" {
		desc += fmt.Sprintf(" (%s)", reason)
	}
	return SagaInput{desc: desc, build: func(f *SagaFixture, instance string) (sagas.Input, error) {
		inst := f.instances[instance]
		ref, ok := inst.targets[step]
		if !ok {
			return sagas.Input{}, fmt.Errorf("instance %s sent no command at step %s (its steps: %s)", instance, step, listOr(slices.Sorted(maps.Keys(inst.targets)), "none"))
		}
		id := sagas.CommandID(f.saga.Name(), instance, step)
		res := commands.Result{CommandID: id, Status: status, Reason: reason, AggregateType: ref.Type, AggregateID: ref.ID}
		return sagas.Input{ID: "result:" + id, Kind: sagas.KindResult, Result: res, Step: step}, nil
	}}
}

// Accepted is Answer(step, commands.StatusAccepted, "").
func Accepted(step string) SagaInput { return Answer(step, commands.StatusAccepted, "") }

// Fire is the instance's pending timeout name falling due; the clock
// moves to its due time. The timeout must be pending (set and neither
// cleared nor ended with the instance): the Runner fires no other.
func Fire(name string) SagaInput {
	return SagaInput{desc: "timeout " + name, build: func(f *SagaFixture, instance string) (sagas.Input, error) {
		inst := f.instances[instance]
		due, ok := inst.timeouts[name]
		if !ok {
			return sagas.Input{}, fmt.Errorf("timeout %s is not pending on instance %s (pending: %s)", name, instance, listOr(slices.Sorted(maps.Keys(inst.timeouts)), "none"))
		}
		if due.After(f.now) {
			f.now = due
		}
		return sagas.Input{ID: "timeout:" + name + ":" + due.Format(time.RFC3339Nano), Kind: sagas.KindTimeout, Timeout: name, Due: due}, nil
	}}
}

// Abort is an operator's abort of the instance by actor, for reason (see
// sagas.Operator.Abort): the saga's Abort compensates, or the instance
// finishes sagas.OutcomeAborted when it has none.
func Abort(actor, reason string) SagaInput {
	return SagaInput{desc: fmt.Sprintf("abort by %s (%s)", actor, reason), build: func(f *SagaFixture, instance string) (sagas.Input, error) {
		f.inputs++
		return sagas.Input{ID: fmt.Sprintf("abort:%d", f.inputs), Kind: sagas.KindAbort, Actor: actor, Reason: reason}, nil
	}}
}

// Advance moves the fixture's clock by d: the next inputs are handled
// (and timeouts they set fall due) that much later.
func (f *SagaFixture) Advance(d time.Duration) *SagaFixture {
	f.now = f.now.Add(d)
	return f
}

// Now is the fixture's clock.
func (f *SagaFixture) Now() time.Time { return f.now }

// Given handles inputs in order, as the history of the When to come.
// An input the saga fails on fails the test.
func (f *SagaFixture) Given(inputs ...SagaInput) *SagaFixture {
	f.t.Helper()
	for _, in := range inputs {
		if st := f.step(in); st.err != nil {
			f.t.Fatalf("testkit: Given %s: %v", st.desc, st.err)
		}
	}
	return f
}

// When handles in and records what it did for the checks.
func (f *SagaFixture) When(in SagaInput) *SagaFixture {
	f.t.Helper()
	f.ran, f.last = true, f.step(in)
	return f
}

// step handles one input as the Runner's transaction does.
func (f *SagaFixture) step(in SagaInput) sagaStep {
	f.t.Helper()
	st := sagaStep{desc: in.String()}
	instance := in.instance
	if !in.routed && instance == "" {
		switch len(f.instances) {
		case 1:
			for id := range f.instances {
				instance = id
			}
		case 0:
			f.t.Fatalf("testkit: %s: no instance yet", st.desc)
		default:
			f.t.Fatalf("testkit: %s: several instances (%s): name one with On", st.desc, strings.Join(slices.Sorted(maps.Keys(f.instances)), ", "))
		}
	}
	if !in.routed && f.instances[instance] == nil {
		f.t.Fatalf("testkit: %s: no instance %s (instances: %s)", st.desc, instance, listOr(slices.Sorted(maps.Keys(f.instances)), "none"))
	}
	if !in.routed && f.instances[instance].outcome != "" {
		st.instance, st.skipped = instance, "instance "+instance+" finished "+f.instances[instance].outcome
		return st
	}
	input, err := in.build(f, instance)
	if err != nil {
		f.t.Fatalf("testkit: %s: %v", st.desc, err)
	}
	start := false
	if in.routed {
		instance, start = f.saga.Route(input)
		if in.instance != "" && instance != in.instance {
			f.t.Fatalf("testkit: %s: Route names instance %q", st.desc, instance)
		}
	}
	st.instance = instance
	if instance == "" {
		st.skipped = "Route names no instance"
		return st
	}
	if err := eventstore.ValidateName("saga instance", instance); err != nil {
		st.err = fmt.Errorf("route of %s: %w", input.ID, err)
		return st
	}
	if f.seen[input.ID] {
		st.skipped = "input " + input.ID + " was handled before"
		return st
	}
	inst := f.instances[instance]
	if inst == nil && start {
		initial, err := f.saga.Initial(instance)
		if err != nil {
			st.err = err
			return st
		}
		inst = &sagaInstance{state: initial, timeouts: map[string]time.Time{}, targets: map[string]eventstore.Ref{}}
		f.instances[instance] = inst
	}
	switch {
	case inst == nil:
		st.skipped = "no instance " + instance + " and Route may not start one"
		return st
	case inst.outcome != "":
		st.skipped = "instance " + instance + " finished " + inst.outcome
		return st
	}
	next, fx, err := f.saga.Handle(instance, inst.state, input, f.now)
	st.fx = fx
	if err != nil {
		st.err = err
		return st
	}
	f.seen[input.ID] = true
	if input.Kind == sagas.KindTimeout {
		delete(inst.timeouts, input.Timeout)
	}
	inst.state, inst.outcome = next, fx.Outcome()
	if inst.outcome != "" {
		clear(inst.timeouts)
	} else {
		for _, name := range fx.Cleared() {
			delete(inst.timeouts, name)
		}
		maps.Copy(inst.timeouts, fx.Timeouts())
	}
	for _, cmd := range fx.Commands() {
		_, step, _ := sagas.ParseCommandID(f.saga.Name(), cmd.ID)
		inst.targets[step] = eventstore.Ref{Type: cmd.AggregateType, ID: cmd.AggregateID}
	}
	for _, c := range fx.Cancellations() {
		_, step, _ := sagas.ParseCommandID(f.saga.Name(), c.CommandID)
		inst.targets[step] = eventstore.Ref{Type: c.AggregateType, ID: c.AggregateID}
	}
	return st
}

// Effects are what the saga recorded for the latest When (nil when it
// was skipped).
func (f *SagaFixture) Effects() *sagas.Effects { return f.last.fx }

// Instances are the ids of the instances started so far, sorted.
func (f *SagaFixture) Instances() []string { return slices.Sorted(maps.Keys(f.instances)) }

// State decodes instance's state into v.
func (f *SagaFixture) State(instance string, v any) {
	f.t.Helper()
	inst := f.instances[instance]
	if inst == nil {
		f.t.Fatalf("testkit: no instance %s (instances: %s)", instance, listOr(f.Instances(), "none"))
	}
	if err := json.Unmarshal(inst.state, v); err != nil {
		f.t.Fatalf("testkit: decode the state of instance %s: %v", instance, err)
	}
}

// handled checks that When ran, was not skipped and did not fail.
func (f *SagaFixture) handled() bool {
	f.t.Helper()
	if !f.ran {
		f.t.Fatal("testkit: a Then check before any When")
	}
	switch {
	case f.last.err != nil:
		f.t.Errorf("%s\nthe saga failed: %v", f.describe(), f.last.err)
		return false
	case f.last.skipped != "":
		f.t.Errorf("%s\nthe input was skipped: %s", f.describe(), f.last.skipped)
		return false
	}
	return true
}

func (f *SagaFixture) describe() string {
	s := "saga " + f.saga.Name() + ": when " + f.last.desc
	if f.last.instance != "" && !strings.Contains(f.last.desc, "instance") {
		s += " (instance " + f.last.instance + ")"
	}
	return s
}

// ExpectedCommand is a command a saga's step should send, for
// ThenCommands: built by Sent.
type ExpectedCommand struct {
	Step          string
	Type          string
	AggregateType string
	AggregateID   string
	Payload       any
}

// Sent is the command of commandType to aggregateType/aggregateID with
// payload (JSON text, or a value to encode) sent at step.
func Sent(step, commandType, aggregateType, aggregateID string, payload any) ExpectedCommand {
	return ExpectedCommand{Step: step, Type: commandType, AggregateType: aggregateType, AggregateID: aggregateID, Payload: payload}
}

func renderCommands(cmds []ExpectedCommand) string {
	if len(cmds) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, c := range cmds {
		fmt.Fprintf(&b, "step %s: %s to %s/%s\n%s\n", c.Step, c.Type, c.AggregateType, c.AggregateID, pretty(c.Payload))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ThenCommands checks that the input sent exactly want, in order: step,
// type, aggregate and payload (as JSON).
func (f *SagaFixture) ThenCommands(want ...ExpectedCommand) *SagaFixture {
	f.t.Helper()
	if !f.handled() {
		return f
	}
	var got []ExpectedCommand
	for _, c := range f.last.fx.Commands() {
		_, step, _ := sagas.ParseCommandID(f.saga.Name(), c.ID)
		got = append(got, Sent(step, c.Type, c.AggregateType, c.AggregateID, c.Payload))
	}
	if w, g := renderCommands(want), renderCommands(got); w != g {
		f.t.Errorf("%s\n%s", f.describe(), mismatch("commands sent", w, g))
	}
	return f
}

// ThenNoCommands checks that the input sent no command.
func (f *SagaFixture) ThenNoCommands() *SagaFixture {
	f.t.Helper()
	return f.ThenCommands()
}

// ExpectedCancel is a cancel a saga should record, for ThenCancels:
// built by Cancelled.
type ExpectedCancel struct {
	Step      string
	Aggregate eventstore.Ref
	Reason    string
}

// Cancelled is the cancel of step's command on aggregate, for reason.
func Cancelled(step string, aggregate eventstore.Ref, reason string) ExpectedCancel {
	return ExpectedCancel{Step: step, Aggregate: aggregate, Reason: reason}
}

func renderCancels(cs []ExpectedCancel) string {
	if len(cs) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "cancel step %s on %s: %s\n", c.Step, c.Aggregate, c.Reason)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ThenCancels checks that the input cancelled exactly want, in order.
func (f *SagaFixture) ThenCancels(want ...ExpectedCancel) *SagaFixture {
	f.t.Helper()
	if !f.handled() {
		return f
	}
	var got []ExpectedCancel
	for _, c := range f.last.fx.Cancellations() {
		_, step, _ := sagas.ParseCommandID(f.saga.Name(), c.CommandID)
		got = append(got, Cancelled(step, eventstore.Ref{Type: c.AggregateType, ID: c.AggregateID}, c.Reason))
	}
	if w, g := renderCancels(want), renderCancels(got); w != g {
		f.t.Errorf("%s\n%s", f.describe(), mismatch("cancels", w, g))
	}
	return f
}

// ThenScheduled checks that the input set timeout name to fall due after
// d (from the time it was handled).
func (f *SagaFixture) ThenScheduled(name string, after time.Duration) *SagaFixture {
	f.t.Helper()
	if !f.handled() {
		return f
	}
	set := f.last.fx.Timeouts()
	due, ok := set[name]
	switch {
	case !ok:
		f.t.Errorf("%s\nwant timeout %s set to fall due after %s; timeouts set: %s", f.describe(), name, after, renderDues(set, f.last.fx.Now()))
	case due.Sub(f.last.fx.Now()) != after:
		f.t.Errorf("%s\nwant timeout %s due after %s, got after %s", f.describe(), name, after, due.Sub(f.last.fx.Now()))
	}
	return f
}

func renderDues(set map[string]time.Time, now time.Time) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(set)) {
		parts = append(parts, fmt.Sprintf("%s after %s", name, set[name].Sub(now)))
	}
	return listOr(parts, "none")
}

// ThenPending checks the timeouts pending on the input's instance after
// it: exactly names, in any order (none when names is empty).
func (f *SagaFixture) ThenPending(names ...string) *SagaFixture {
	f.t.Helper()
	if !f.handled() {
		return f
	}
	got := slices.Sorted(maps.Keys(f.instances[f.last.instance].timeouts))
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(want, got) {
		f.t.Errorf("%s\nwant pending timeouts %s, got %s", f.describe(), listOr(want, "none"), listOr(got, "none"))
	}
	return f
}

// ThenFinished checks that the input finished its instance with
// outcome.
func (f *SagaFixture) ThenFinished(outcome string) *SagaFixture {
	f.t.Helper()
	if f.handled() && f.last.fx.Outcome() != outcome {
		got := "the instance runs on"
		if o := f.last.fx.Outcome(); o != "" {
			got = "finished " + o
		}
		f.t.Errorf("%s\nwant finished %s, got %s", f.describe(), outcome, got)
	}
	return f
}

// ThenRunning checks that the input left its instance running.
func (f *SagaFixture) ThenRunning() *SagaFixture {
	f.t.Helper()
	if f.handled() && f.last.fx.Outcome() != "" {
		f.t.Errorf("%s\nwant the instance running, got finished %s", f.describe(), f.last.fx.Outcome())
	}
	return f
}

// ThenSkipped checks that the input was skipped: no instance took it
// (Route named none, or one it may not start), its instance had
// finished, or its id had been handled before.
func (f *SagaFixture) ThenSkipped() *SagaFixture {
	f.t.Helper()
	if !f.ran {
		f.t.Fatal("testkit: a Then check before any When")
	}
	if f.last.skipped == "" {
		if f.last.err != nil {
			f.t.Errorf("%s\nwant the input skipped, the saga failed: %v", f.describe(), f.last.err)
		} else {
			f.t.Errorf("%s\nwant the input skipped, instance %s handled it", f.describe(), f.last.instance)
		}
	}
	return f
}

// ThenState checks the state of the input's instance after it against
// want, as JSON.
func (f *SagaFixture) ThenState(want any) *SagaFixture {
	f.t.Helper()
	if !f.handled() {
		return f
	}
	if w, g := pretty(want), pretty(f.instances[f.last.instance].state); w != g {
		f.t.Errorf("%s\n%s", f.describe(), mismatch("state of instance "+f.last.instance, w, g))
	}
	return f
}

// ThenFails checks that the saga failed on the input with an error whose
// message contains msg; permanent says whether it must be permanent
// (eventstore.IsPermanent: the Runner poisons the input) or transient
// (it retries it).
func (f *SagaFixture) ThenFails(msg string, permanent bool) *SagaFixture {
	f.t.Helper()
	if !f.ran {
		f.t.Fatal("testkit: a Then check before any When")
	}
	err := f.last.err
	switch {
	case err == nil:
		f.t.Errorf("%s\nwant a failure containing %q, got none", f.describe(), msg)
	case !strings.Contains(err.Error(), msg):
		f.t.Errorf("%s\nwant a failure containing %q, got: %v", f.describe(), msg, err)
	case eventstore.IsPermanent(err) != permanent:
		f.t.Errorf("%s\nwant a failure that is permanent=%v, got permanent=%v: %v", f.describe(), permanent, !permanent, err)
	}
	return f
}

// listOr joins items with ", ", or returns none when there are none.
func listOr(items []string, none string) string {
	if len(items) == 0 {
		return none
	}
	return strings.Join(items, ", ")
}
