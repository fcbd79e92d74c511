package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/internal/testenv"
)

// TestDemoOnceTellsAStoryItsReadModelsConfirm runs `eventpipe demo
// --once` as a user would (the real binary, the real stack, its own
// tables, topics and schema) and reads its output the way a reader
// does: from the commands it printed with their answers it works out what
// each read model must hold (balances from the accepted transactions,
// each order's status from its last accepted command, each todo from its
// last accepted request) and checks the read models the demo printed
// against that.
func TestDemoOnceTellsAStoryItsReadModelsConfirm(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "eventpipe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ddb := testenv.DynamoDB(t)
	testenv.KafkaBrokers(t)
	events, leases := testenv.UniqueName(t, "events"), testenv.UniqueName(t, "leases")
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, events); testenv.DeleteTable(t, ddb, leases) })
	schema, pgURL := testenv.PostgresSchema(t, "demo")
	free := func() string { return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) }
	cmd := exec.Command(bin, "demo", "--once", "--postgres-schema", schema, "--log-dir", t.TempDir(),
		"--relay-metrics-addr", free(), "--consume-metrics-addr", free())
	cmd.Env = append(os.Environ(), "EVENTPIPE_EVENTS_TABLE="+events, "EVENTPIPE_LEASES_TABLE="+leases,
		"EVENTPIPE_TOPIC_PREFIX="+testenv.UniqueName(t, "ns")+".", "EVENTPIPE_HTTP_ADDR="+free(),
		"EVENTPIPE_POSTGRES_URL="+pgURL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo --once: %v\n%s", err, out.String())
		}
	case <-time.After(4 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("demo --once still running after 4 minutes\n%s", out.String())
	}
	story := out.String()
	if !strings.Contains(story, "every read model shows what the commands imply") {
		t.Fatalf("the story did not end as it should:\n%s", story)
	}

	// What the commands imply.
	balances := map[string]int64{}
	for _, m := range regexp.MustCompile(`OpenAccount\s+(\S+)\s+\{\}\s+→ accepted`).FindAllStringSubmatch(story, -1) {
		balances[m[1]] = 0
	}
	for _, m := range regexp.MustCompile(`RecordTransaction\s+(\S+)\s+\{"desc":"[^"]*","amount":(-?\d+)\}\s+→ accepted`).FindAllStringSubmatch(story, -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		balances[m[1]] += n
	}
	statusOf := map[string]string{"PlaceOrder": "placed", "ProcessPayment": "paid", "ShipOrder": "shipped", "DeliverOrder": "delivered", "RefundOrder": "refunded"}
	orders := map[string]string{}
	for _, m := range regexp.MustCompile(`(PlaceOrder|ProcessPayment|ShipOrder|DeliverOrder|RefundOrder)\s+(\S+)\s+.*?→ accepted`).FindAllStringSubmatch(story, -1) {
		orders[m[2]] = statusOf[m[1]]
	}
	todos := map[string]string{} // id → message, or "deleted"
	for _, m := range regexp.MustCompile(`POST /todo(?:/(\S+))?\s.*?\{(?:"id":"([^"]+)",)?"title":"[^"]*","message":"([^"]*)"\} → 20[01]`).FindAllStringSubmatch(story, -1) {
		id := m[1] + m[2]
		todos[id] = m[3]
	}
	for _, m := range regexp.MustCompile(`DELETE /todo/(\S+)\s.*→ 204`).FindAllStringSubmatch(story, -1) {
		todos[m[1]] = "deleted"
	}
	if len(balances) != 3 || len(orders) != 3 || len(todos) != 2 {
		t.Fatalf("the story sent %d accounts, %d orders, %d todos; want 3, 3, 2:\n%s", len(balances), len(orders), len(todos), story)
	}

	// What the read models showed.
	shown := 0
	for _, m := range regexp.MustCompile(`(?m)^\s+(\S+)\s+owner .*balance\s+(-?\d+)`).FindAllStringSubmatch(story, -1) {
		shown++
		if got, _ := strconv.ParseInt(m[2], 10, 64); got != balances[m[1]] {
			t.Errorf("account %s shows balance %d, the commands imply %d", m[1], got, balances[m[1]])
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\S+)\s+(placed|paid|shipped|delivered|refunded)\s+total`).FindAllStringSubmatch(story, -1) {
		shown++
		if m[2] != orders[m[1]] {
			t.Errorf("order %s shows %s, the commands imply %s", m[1], m[2], orders[m[1]])
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\S+)\s+(?:deleted|title "[^"]*" message "([^"]*)")\s+\(expected`).FindAllStringSubmatch(story, -1) {
		shown++
		got := m[2]
		if strings.Contains(m[0], " deleted ") {
			got = "deleted"
		}
		if got != todos[m[1]] {
			t.Errorf("todo %s shows %q, the requests imply %q", m[1], got, todos[m[1]])
		}
	}
	if shown != 8 {
		t.Errorf("the story showed %d read-model rows, want 8", shown)
	}
	if t.Failed() {
		t.Logf("the story:\n%s", story)
	}
}
