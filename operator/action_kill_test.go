package operator_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/operator"
)

// envRecalculateChild makes this test binary run `recalculate --all` on
// the bank accounts of the environment's endpoints, printing "done <id>"
// after each aggregate.
const envRecalculateChild = "EVENTPIPE_TEST_RECALCULATE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envRecalculateChild) != "" {
		_, err := operator.Recalculate(context.Background(), operator.RecalculateConfig{Type: bankaccount.AggregateType, All: true,
			Actor: "child", Reason: "killed mid-way", Progress: func(r commands.Recalculation) { fmt.Printf("done %s\n", r.Aggregate.ID) }})
		if err != nil {
			fmt.Fprintln(os.Stderr, "recalculate child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestAnOperatorActionKilledAfterItsEffectIsShownStarted corrupts the
// STATE of 120 accounts and runs `recalculate --all` in a child process,
// SIGKILLed once it has rewritten some of them and before it has done
// all: the accounts it did are rewritten, and operator_actions holds the
// run as started, with no result, as OperatorActions and Status show it
// (an action recorded only after it acted would leave no trace).
func TestAnOperatorActionKilledAfterItsEffectIsShownStarted(t *testing.T) {
	const accounts = 120
	s := newRecalcStack(t)
	for i := range accounts {
		id := fmt.Sprintf("k-%03d", i)
		s.open(t, id, 100)
		s.corrupt(t, id, fmt.Sprintf(`{"id":%q,"balance":999999,"minimumBalance":-1000,"closed":false}`, id))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRecalculateChild+"=1", endpoints.EnvEventsTable+"="+s.ep.EventsTable, endpoints.EnvKeysTable+"="+s.ep.KeysTable, endpoints.EnvPostgres+"="+s.ep.Postgres,
		endpoints.EnvTopicPrefix+"="+s.ep.TopicPrefix, "EVENTPIPE_LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	var done []string
	lines := bufio.NewScanner(out)
	for len(done) < 5 && lines.Scan() {
		if id, ok := strings.CutPrefix(lines.Text(), "done "); ok {
			done = append(done, id)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
	for lines.Scan() { // what it printed before the kill landed
		if id, ok := strings.CutPrefix(lines.Text(), "done "); ok {
			done = append(done, id)
		}
	}
	if len(done) < 5 || len(done) >= accounts {
		t.Fatalf("the kill landed after %d of %d accounts, want mid-way", len(done), accounts)
	}
	for _, id := range done[:5] {
		if log, state, _ := s.fold(t, id); log != state {
			t.Errorf("account %s done before the kill: STATE %+v, want the fold %+v", id, state, log)
		}
	}

	p := eventpipe.Process{Catalog: s.catalog, Endpoints: s.ep}
	actions, err := operator.OperatorActions(context.Background(), operator.OperatorActionsConfig{Process: p, Action: operator.ActionRecalculate})
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != 1 || actions[0].State != operator.StateStarted || actions[0].Result != operator.ResultUnfinished ||
		actions[0].Actor != "child" || !actions[0].Finished.IsZero() {
		t.Fatalf("recorded actions %+v, want the killed run, started and unfinished", actions)
	}
	r := operator.Status(context.Background(), operator.StatusConfig{Process: p})
	if r.OperatorActionsErr != nil {
		t.Fatal(r.OperatorActionsErr)
	}
	if len(r.OperatorActions) == 0 || r.OperatorActions[0].ID != actions[0].ID || r.OperatorActions[0].State != operator.StateStarted {
		t.Errorf("status shows the operator actions %+v, want the killed run first, started", r.OperatorActions)
	}
	t.Logf("killed after %d of %d accounts; recorded %+v", len(done), accounts, actions[0])
}
