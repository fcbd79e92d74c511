package domains_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMismatchedPayloadsDoNotCompile builds testdata/mismatch, which
// pairs a todo event and a todo command with payloads of other types: a
// rule, a decision and a new event. The compiler must refuse each of the
// three, and nothing else (a fixture broken some other way would prove
// nothing).
func TestMismatchedPayloadsDoNotCompile(t *testing.T) {
	out, err := exec.Command("go", "build", "-o", "/dev/null", "./testdata/mismatch").CombinedOutput()
	if err == nil {
		t.Fatal("testdata/mismatch compiled: a payload of another type was accepted")
	}
	want := map[string]string{
		"rule":     "mismatch.go:16:54: in call to eventstore.OnEvent, type func(s todo.Todo, p ",
		"rule's":   "does not match inferred type func(state todo.Todo, ev todo.TodoCreatedData, out *eventstore.Outbox) (todo.Todo, error)",
		"decision": "mismatch.go:21:58: in call to commands.OnCommand",
		"decide's": "does not match inferred type func(cur eventstore.State[todo.Todo], cmd commands.Command, p todo.TodoData)",
		"event":    "mismatch.go:26:39: cannot use order.OrderPlacedData{…}",
		"event's":  "as todo.TodoCreatedData value in argument to todo.TodoCreatedEvent.New",
	}
	for what, msg := range want {
		if !strings.Contains(string(out), msg) {
			t.Errorf("the %s mismatch: no %q in the compiler's output:\n%s", what, msg, out)
		}
	}
	errors := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "mismatch.go:") {
			errors++
		}
	}
	if errors != 3 {
		t.Errorf("%d errors, want the 3 mismatches:\n%s", errors, out)
	}
}
