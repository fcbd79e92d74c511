package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/dev/testenv"
)

// TestDemoOnceTellsAStoryItsReadModelsConfirm runs `eventpipe demo
// --once` as a user would (the real binary, the real stack, its own
// tables, topics and schema) and reads its output the way a reader
// does: from the commands it printed with their answers it works out what
// each read model must hold (balances from the accepted transactions,
// each order's status from its last accepted command, each todo from its
// last accepted request) and checks the read models the demo printed
// against that. Its analytics chapter is read the same way: from the
// events each POST carried (and the batch posted twice) it works out
// every session's count, entry, exit and duration and every hour's
// events, page views, sessions and users, and from the accepted order
// commands what they add to the order roll-up.
func TestDemoOnceTellsAStoryItsReadModelsConfirm(t *testing.T) {
	testenv.Integration(t)
	bin := eventpipeBinary(t)
	ddb := testenv.DynamoDB(t)
	testenv.KafkaBrokers(t)
	events, leases, analytics := testenv.UniqueName(t, "events"), testenv.UniqueName(t, "leases"), testenv.UniqueName(t, "analytics")
	t.Cleanup(func() {
		testenv.DeleteTable(t, ddb, events)
		testenv.DeleteTable(t, ddb, leases)
		testenv.DeleteTable(t, ddb, analytics)
	})
	schema, pgURL := testenv.PostgresSchema(t, "demo") // picked by the URL's search_path, for the demo and its children
	free := func() string { return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) }
	cmd := exec.Command(bin, "demo", "--once", "--log-dir", t.TempDir(),
		"--relay-metrics-addr", free(), "--consume-metrics-addr", free())
	cmd.Env = append(os.Environ(), "EVENTPIPE_EVENTS_TABLE="+events, "EVENTPIPE_LEASES_TABLE="+leases, "EVENTPIPE_ANALYTICS_TABLE="+analytics,
		"EVENTPIPE_TOPIC_PREFIX="+testenv.UniqueName(t, "ns")+".", "EVENTPIPE_HTTP_ADDR="+free(),
		"EVENTPIPE_POSTGRES_URL="+pgURL)
	story, err := runWatched(t, cmd)
	if err != nil {
		t.Fatalf("demo --once: %v\n%s", err, story)
	}
	if !strings.Contains(story, "every read model shows what the commands imply") {
		t.Fatalf("the story did not end as it should:\n%s", story)
	}
	if !strings.Contains(story, "in schema "+schema) {
		t.Fatalf("the story does not migrate the schema %s of EVENTPIPE_POSTGRES_URL:\n%s", schema, story)
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
	if len(balances) != 5 || len(orders) != 3 || len(todos) != 2 {
		t.Fatalf("the story sent %d accounts, %d orders, %d todos; want 5 (one opened for the transfers, one on day two), 3, 2:\n%s", len(balances), len(orders), len(todos), story)
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
	checkAnalyticsChapter(t, story)
	checkTransfersChapter(t, story, balances)
	checkDayTwoChapter(t, story, pgURL)
	if t.Failed() {
		t.Logf("the story:\n%s", story)
	}
}

// checkAnalyticsChapter works out from the events the analytics chapter
// posted what its sessions, hourly aggregations and order roll-up must
// show, and checks what it printed against that.
func checkAnalyticsChapter(t *testing.T, story string) {
	t.Helper()
	type event struct {
		hour, typ, url string
		at             time.Duration
	}
	type session struct {
		user   string
		events []event
	}
	sessions := map[string]*session{}
	var last *session
	var lastBatch []event
	post := regexp.MustCompile(`^\s+POST /sources/\S+/events\s+session (\S+), (?:user (\S+)|anonymous): (\d+) events? → 201`)
	again := regexp.MustCompile(`^\s+POST /sources/\S+/events\s+session (\S+) again, the same batch .*→ 201 Created: (\d+) more`)
	step := regexp.MustCompile(`(\d\d):(\d\d):(\d\d) (\S+) (\S+)`)
	// The story prints each event's UTC time of day; the burst is of the
	// last two hours, so a time of day later than now (give or take a
	// few minutes) is yesterday's: a run near midnight reads its order
	// right.
	now := time.Now().UTC()
	nowOfDay := time.Duration(now.Hour())*time.Hour + time.Duration(now.Minute())*time.Minute + time.Duration(now.Second())*time.Second
	lines := strings.Split(story, "\n")
	for i, line := range lines {
		if m := post.FindStringSubmatch(line); m != nil && i+1 < len(lines) {
			last = &session{user: m[2]}
			sessions[m[1]] = last
			lastBatch = nil
			for _, e := range step.FindAllStringSubmatch(lines[i+1], -1) {
				h, _ := strconv.Atoi(e[1])
				mi, _ := strconv.Atoi(e[2])
				sec, _ := strconv.Atoi(e[3])
				at := time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec)*time.Second
				if at > nowOfDay+5*time.Minute {
					at -= 24 * time.Hour
				}
				lastBatch = append(lastBatch, event{hour: e[1], typ: e[4], url: e[5], at: at})
			}
			if n, _ := strconv.Atoi(m[3]); n != len(lastBatch) {
				t.Errorf("session %s: %d events stored, %d listed", m[1], n, len(lastBatch))
			}
			last.events = append(last.events, lastBatch...)
		}
		if m := again.FindStringSubmatch(line); m != nil && last != nil && sessions[m[1]] == last {
			last.events = append(last.events, lastBatch...)
		}
	}
	if len(sessions) != 4 {
		t.Fatalf("the analytics chapter posted %d sessions, want 4:\n%s", len(sessions), story)
	}
	// What the burst implies. Times are of the last two hours, so the hour
	// of the day names a bucket.
	type hour struct {
		events, views, sessions int64
		users                   map[string]bool
	}
	hours := map[string]*hour{}
	at := func(h string) *hour {
		if hours[h] == nil {
			hours[h] = &hour{users: map[string]bool{}}
		}
		return hours[h]
	}
	type want struct {
		events      int64
		entry, exit string
		duration    int64
	}
	wants := map[string]want{}
	for id, s := range sessions {
		first, lastEv := s.events[0], s.events[0]
		for _, e := range s.events {
			if e.at < first.at {
				first = e
			}
			if e.at > lastEv.at {
				lastEv = e
			}
			h := at(e.hour)
			h.events++
			if e.typ == "page_view" {
				h.views++
			}
			if s.user != "" {
				h.users[s.user] = true
			}
		}
		at(first.hour).sessions++
		d := lastEv.at - first.at
		wants[id] = want{events: int64(len(s.events)), entry: first.url, exit: lastEv.url, duration: int64(d / time.Second)}
	}

	// What the chapter showed.
	shown := 0
	for _, m := range regexp.MustCompile(`(?m)^\s+(s\d+)\s+(\S+)\s+(\d+) events?\s+(\S+)\s+→\s+(\S+)\s+(\d+) s\s+\(expected`).FindAllStringSubmatch(story, -1) {
		shown++
		w := wants[m[1]]
		n, _ := strconv.ParseInt(m[3], 10, 64)
		d, _ := strconv.ParseInt(m[6], 10, 64)
		if n != w.events || m[4] != w.entry || m[5] != w.exit || d != w.duration {
			t.Errorf("session %s shows %s events, %s → %s, %s s; the burst implies %d, %s → %s, %d s", m[1], m[3], m[4], m[5], m[6], w.events, w.entry, w.exit, w.duration)
		}
		if user := sessions[m[1]].user; m[2] != user && !(user == "" && m[2] == "anonymous") {
			t.Errorf("session %s shows user %s, the burst says %q", m[1], m[2], user)
		}
	}
	if shown != len(wants) {
		t.Errorf("the chapter showed %d sessions, want %d", shown, len(wants))
	}
	shown = 0
	for _, m := range regexp.MustCompile(`(?m)^\s+\d{4}-\d\d-\d\dT(\d\d):00:00Z\s+events\s+(\d+)\s+page views\s+(\d+)\s+sessions (\d+)\s+unique users (\d+)`).FindAllStringSubmatch(story, -1) {
		shown++
		h := at(m[1])
		got := [4]string{m[2], m[3], m[4], m[5]}
		exp := [4]string{strconv.FormatInt(h.events, 10), strconv.FormatInt(h.views, 10), strconv.FormatInt(h.sessions, 10), strconv.Itoa(len(h.users))}
		if got != exp {
			t.Errorf("hour %s shows events, page views, sessions, users %v; the burst implies %v", m[1], got, exp)
		}
	}
	if shown != len(hours) || shown < 2 {
		t.Errorf("the chapter showed %d hourly aggregations, the burst touches %d hours (at least 2)", shown, len(hours))
	}

	// The order roll-up: what this run's accepted order commands add.
	var orders, revenue, refunds int64
	orders = int64(len(regexp.MustCompile(`PlaceOrder\s+\S+\s+.*→ accepted`).FindAllString(story, -1)))
	refunds = int64(len(regexp.MustCompile(`RefundOrder\s+\S+\s+.*→ accepted`).FindAllString(story, -1)))
	for _, m := range regexp.MustCompile(`ProcessPayment\s+\S+\s+\{"amount":(\d+)\}\s+→ accepted`).FindAllStringSubmatch(story, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		revenue += n
	}
	m := regexp.MustCompile(`this run's orders added (\d+) orders?, (\d+) in revenue, (\d+) refunds?`).FindStringSubmatch(story)
	if m == nil {
		t.Fatalf("the chapter did not show what this run added to the order roll-up:\n%s", story)
	}
	if got, exp := m[1:4], []string{strconv.FormatInt(orders, 10), strconv.FormatInt(revenue, 10), strconv.FormatInt(refunds, 10)}; !slices.Equal(got, exp) {
		t.Errorf("the order roll-up shows this run adding orders, revenue, refunds %v; the order commands imply %v", got, exp)
	}
}

// checkTransfersChapter reads the transfers chapter: each transfer's
// outcome must match the money it shows moving on the accounts (a
// completed transfer a debit and a credit of its amount, a compensated
// one a debit and a refund, a failed one nothing), and the balances it
// ends with must be the balances the commands imply plus the completed
// transfers.
func checkTransfersChapter(t *testing.T, story string, balances map[string]int64) {
	t.Helper()
	want := map[string]int64{}
	for id, b := range balances {
		want[id] = b
	}
	lines := regexp.MustCompile(`(?m)^\s+(\S+)\s+(\S+) → (\S+)\s+(\d+)\s+(completed|compensated|failed)\b.*?\s{2,}(debit .*|no money moved)$`).FindAllStringSubmatch(story, -1)
	if len(lines) != 3 {
		t.Fatalf("the transfers chapter showed %d transfers, want 3:\n%s", len(lines), story)
	}
	outcomes := map[string]bool{}
	for _, m := range lines {
		from, to, outcome, moved := m[2], m[3], m[5], m[6]
		amount, _ := strconv.ParseInt(m[4], 10, 64)
		outcomes[outcome] = true
		wantMoved := map[string]string{
			"completed":   fmt.Sprintf("debit -%d, credit +%d", amount, amount),
			"compensated": fmt.Sprintf("debit -%d, refund +%d", amount, amount),
			"failed":      "no money moved",
		}[outcome]
		if moved != wantMoved {
			t.Errorf("transfer %s (%s) shows %q, want %q", m[1], outcome, moved, wantMoved)
		}
		if outcome == "completed" {
			want[from] -= amount
			want[to] += amount
		}
	}
	if len(outcomes) != 3 {
		t.Errorf("the transfers ended %v, want one of each outcome", outcomes)
	}
	m := regexp.MustCompile(`balances in the accounts read model: alice (-?\d+), bob (-?\d+), carol (-?\d+), erin (-?\d+)`).FindStringSubmatch(story)
	if m == nil {
		t.Fatalf("the transfers chapter showed no balances:\n%s", story)
	}
	for i, name := range []string{"alice", "bob", "carol", "erin"} {
		got, _ := strconv.ParseInt(m[i+1], 10, 64)
		var id string
		for acc := range want {
			if strings.HasPrefix(acc, name+"-") {
				id = acc
			}
		}
		if id == "" || got != want[id] {
			t.Errorf("after the transfers %s shows %d, the commands and outcomes imply %d", name, got, want[id])
		}
	}
}

// checkDayTwoChapter reads the day-two chapter: the two poisoned notices
// redriven once and then reported already redriven, one notice sent
// per account, the skipped deposit, and what Postgres holds after it:
// both redrives and the skip among the operator actions, the deposit in
// skipped_events, the ledger rows of the loan and the bonus only, and
// nothing left parked.
func checkDayTwoChapter(t *testing.T, story, pgURL string) {
	t.Helper()
	if n := len(regexp.MustCompile(`(?m)^\s+\S*poison\.handler\.overdraft-notices/\d+/\d+: redriven to \S*outbound\.accountOverdrawn$`).FindAllString(story, -1)); n != 2 {
		t.Errorf("the first redrive redrove %d notices, want 2", n)
	}
	if n := len(regexp.MustCompile(`(?m)^\s+\S*poison\.handler\.overdraft-notices/\d+/\d+: already redriven by demo at `).FindAllString(story, -1)); n != 2 {
		t.Errorf("the second redrive found %d notices already redriven, want 2", n)
	}
	for _, who := range []string{"bob", "carol"} {
		if n := len(regexp.MustCompile(`(?m)^\s+sent: Dear customer, your account `+who+`-\S+ is overdrawn\.$`).FindAllString(story, -1)); n != 1 {
			t.Errorf("%d notices sent to %s, want 1", n, who)
		}
	}
	m := regexp.MustCompile(`(?m)^\s+(bankaccount/frank-\S+): skipped sequence 2 \(TransactionAccepted, event (\S+)\)$`).FindStringSubmatch(story)
	if m == nil {
		t.Fatalf("the day-two chapter skipped nothing:\n%s", story)
	}
	account := strings.TrimPrefix(m[1], "bankaccount/")
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var actions []string
	rows, err := db.Query(ctx, `SELECT action || ' ' || actor || ' ' || result FROM operator_actions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		actions = append(actions, a)
	}
	if rows.Err() != nil || len(actions) != 3 || actions[0] != "poison redrive demo 2 redriven" || actions[1] != "poison redrive demo 2 already redriven" ||
		!strings.HasPrefix(actions[2], "parked skip demo skipped "+m[1]+" #2") {
		t.Errorf("operator actions %q (%v), want the two redrives and the skip", actions, rows.Err())
	}
	var skippedEvent string
	if err := db.QueryRow(ctx, `SELECT event_id FROM skipped_events WHERE aggregate_id = $1`, account).Scan(&skippedEvent); err != nil || skippedEvent != m[2] {
		t.Errorf("skipped_events holds %q (%v), want %s", skippedEvent, err, m[2])
	}
	var ledger string
	if err := db.QueryRow(ctx, `SELECT string_agg(seq || ':' || amount, ',' ORDER BY seq) FROM large_transactions WHERE account_id = $1`, account).Scan(&ledger); err != nil || ledger != "3:-1200,4:1000" {
		t.Errorf("the ledger holds %q (%v) for %s, want the loan and the bonus", ledger, err, account)
	}
	var parked int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM parked_events`).Scan(&parked); err != nil || parked != 0 {
		t.Errorf("%d events still parked (%v)", parked, err)
	}
}
