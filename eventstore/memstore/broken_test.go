package memstore_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/eventstore/storetest"
)

// brokenEnv selects, in the child process, the broken store that
// TestBrokenVariantChild runs the suite against.
const brokenEnv = "EVENTPIPE_STORETEST_BROKEN"

// brokenVariants are stores that each break one promise, with the
// subtests of the suite that must catch it.
var brokenVariants = map[string]struct {
	open    func(t *testing.T, schema eventstore.Schema) storetest.Subject
	catches []string
}{
	// Appends at whatever version the aggregate has: no conflicts.
	"no-version-check": {wrap(func(s *memstore.Store) eventstore.Store { return noVersionCheck{s} }),
		[]string{"ExpectedVersion", "ConcurrentAppenders"}},
	// Writes the events but drops STATE and the outbox.
	"drops-state-and-outbox": {wrap(func(s *memstore.Store) eventstore.Store { return dropsStateAndOutbox{s} }),
		[]string{"StateAndOutboxCommitTogether"}},
	// Writes the first event of an append that fails a size limit, as a
	// store writing item by item would.
	"partial-writes": {wrap(func(s *memstore.Store) eventstore.Store { return partialWrites{s} }),
		[]string{"BadInputWritesNothing"}},
	// Records no command ids.
	"forgets-commands": {wrap(func(s *memstore.Store) eventstore.Store { return forgetsCommands{s} }),
		[]string{"DuplicateCommand", "RecordRefusal", "RefusalRacesAppend"}},
	// Ignores the schema's upcasters.
	"no-upcast": {func(t *testing.T, schema eventstore.Schema) storetest.Subject {
		schema.Upcasters = nil
		return open(t, schema)
	}, []string{"Upcasting"}},
}

// open is the suite's opener of a healthy memory store.
func open(t *testing.T, schema eventstore.Schema) storetest.Subject {
	s, err := memstore.New(memstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return storetest.Subject{Store: s, Outbound: s.Outbound}
}

// wrap is an opener of a memory store behind a broken wrapper.
func wrap(broken func(*memstore.Store) eventstore.Store) func(*testing.T, eventstore.Schema) storetest.Subject {
	return func(t *testing.T, schema eventstore.Schema) storetest.Subject {
		sub := open(t, schema)
		sub.Store = broken(sub.Store.(*memstore.Store))
		return sub
	}
}

// TestContractSuiteFailsBrokenStores proves the suite can fail: it runs
// the suite in a child process against each broken variant and wants the
// child to fail, naming the subtests that must catch the breakage.
func TestContractSuiteFailsBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again per variant")
	}
	for name, v := range brokenVariants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenVariantChild$", "-test.count=1", "-test.timeout=5m")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("the suite did not fail against %s (%v):\n%s", name, err, out)
			}
			for _, sub := range v.catches {
				if want := "--- FAIL: TestBrokenVariantChild/" + sub + " "; !strings.Contains(string(out), want) {
					t.Errorf("no %q in the output against %s:\n%s", want, name, out)
				}
			}
			if !t.Failed() {
				var fails []string
				for _, l := range strings.Split(string(out), "\n") {
					if strings.Contains(l, "--- FAIL") {
						fails = append(fails, strings.TrimSpace(l))
					}
				}
				t.Logf("%s: %s", name, strings.Join(fails, "; "))
			}
		})
	}
}

// TestBrokenVariantChild runs the suite against the broken variant named
// by $EVENTPIPE_STORETEST_BROKEN; it is skipped unless
// TestContractSuiteFailsBrokenStores started it.
func TestBrokenVariantChild(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		return // run by TestContractSuiteFailsBrokenStores in a child process; nothing to do here
	}
	v, ok := brokenVariants[name]
	if !ok {
		t.Fatalf("unknown broken variant %q", name)
	}
	storetest.Run(t, v.open)
}

type noVersionCheck struct{ *memstore.Store }

func (s noVersionCheck) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	v, err := s.Store.Version(ctx, req.Aggregate)
	if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
		return eventstore.AppendResult{}, err
	}
	shift := v - req.ExpectedVersion
	req.ExpectedVersion = v
	req.Events = append([]eventstore.Envelope(nil), req.Events...)
	for i := range req.Events {
		req.Events[i].Sequence += shift
	}
	req.Outbound = append([]eventstore.Outbound(nil), req.Outbound...)
	for i := range req.Outbound {
		req.Outbound[i].Seq += shift
	}
	return s.Store.Append(ctx, req)
}

type dropsStateAndOutbox struct{ *memstore.Store }

func (s dropsStateAndOutbox) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	if len(req.Events) > 0 {
		req.State, req.Outbound = nil, nil
	}
	return s.Store.Append(ctx, req)
}

type partialWrites struct{ *memstore.Store }

func (s partialWrites) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	res, err := s.Store.Append(ctx, req)
	if (errors.Is(err, eventstore.ErrItemTooLarge) || errors.Is(err, eventstore.ErrTooManyItems) || errors.Is(err, eventstore.ErrTransactionTooLarge)) && len(req.Events) > 0 {
		first := req
		first.Events, first.State, first.Outbound, first.CommandID = req.Events[:1], nil, nil, ""
		_, _ = s.Store.Append(ctx, first)
	}
	return res, err
}

type forgetsCommands struct{ *memstore.Store }

func (s forgetsCommands) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	req.CommandID = ""
	return s.Store.Append(ctx, req)
}

func (s forgetsCommands) RecordRefusal(context.Context, eventstore.Ref, string, eventstore.Refusal) (eventstore.AppendResult, error) {
	return eventstore.AppendResult{}, nil
}

func (s forgetsCommands) CommandResult(ctx context.Context, ref eventstore.Ref, id string) (eventstore.AppendResult, error) {
	return eventstore.AppendResult{}, eventstore.ErrCommandNotFound
}
