package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/authtest"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// schemaDump returns every row of every table of the read models'
// Postgres schema as text: what a pg_dump of it would hold.
func schemaDump(t *testing.T, db *pgxpool.Pool) string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables of the schema: %v, %v", tables, err)
	}
	return tableRows(t, db, tables...)
}

// tableRows is every row of tables, each as text, in order.
func tableRows(t *testing.T, db *pgxpool.Pool, tables ...string) string {
	t.Helper()
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.Query(context.Background(), `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:\n%s\n", table, strings.Join(texts, "\n"))
	}
	return b.String()
}

// TestForgetScrubsTheReadModelsAndRefusesCommands runs the pipeline on
// the stack (the write side's dispatcher, the relay, the todos and
// accounts read models, the todos-search model), with three subjects' personal data in todos
// and an account, then forgets two of them with operator.Forget (as
// `eventpipe forget` does): their rows and search documents keep their
// ids, versions and balances with every personal value "[forgotten]",
// nowhere in the schema or the index any more; the third subject's stay readable; commands on the
// forgotten aggregates are refused with privacy.forgotten; forgetting
// again reports the first time; both are recorded as operator actions.
func TestForgetScrubsTheReadModelsAndRefusesCommands(t *testing.T) {
	ctx := context.Background()
	ep := integration.Isolate(t)
	quiet := slog.New(slog.DiscardHandler)
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}}); err != nil {
		t.Fatal(err)
	}
	svc := rigs.NewService(t, ep, integration.UniqueName(t, "g"))
	send := func(typ, aggType, id, actor string, payload any) commands.Result {
		t.Helper()
		cmd := mustCmd(t, typ, aggType, id, payload)
		cmd.Actor, cmd.ActorSource = actor, eventstore.ActorHTTP
		res, err := svc.Dispatcher.Dispatch(ctx, cmd)
		if err != nil {
			t.Fatalf("%s %s/%s: %v", typ, aggType, id, err)
		}
		return res
	}
	accept := func(typ, aggType, id, actor string, payload any) {
		t.Helper()
		if res := send(typ, aggType, id, actor, payload); res.Status != commands.StatusAccepted {
			t.Fatalf("%s %s/%s: %+v", typ, aggType, id, res)
		}
	}
	// ada (todos t-ada-1, t-ada-2), grace (t-grace) and the account
	// acc-bob, its own subject.
	forgotten := []string{"Ada's dentist at nine", "ask Ada about the engine", "Ada's new title", "Robert", "Bobbington", "salary of Robert"}
	kept := []string{"Grace's compiler notes", "COBOL at ten"}
	accept(todo.CreateTodo, todo.AggregateType, "t-ada-1", "ada", todo.TodoData{Title: forgotten[0], Message: forgotten[1]})
	accept(todo.CreateTodo, todo.AggregateType, "t-ada-2", "ada", todo.TodoData{Title: "draft"})
	accept(todo.UpdateTodo, todo.AggregateType, "t-ada-2", "ada", todo.TodoData{Title: forgotten[2]})
	accept(todo.CreateTodo, todo.AggregateType, "t-grace", "grace", todo.TodoData{Title: kept[0], Message: kept[1]})
	accept(bankaccount.OpenAccount, bankaccount.AggregateType, "acc-bob", "ops", struct{}{})
	accept(bankaccount.RenameOwner, bankaccount.AggregateType, "acc-bob", "ops", bankaccount.OwnerRenamedData{OwnerFirst: forgotten[3], OwnerLast: forgotten[4]})
	accept(bankaccount.RecordTransaction, bankaccount.AggregateType, "acc-bob", "ops", bankaccount.TransactionAcceptedData{Desc: forgotten[5], Amount: 1200})

	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	cons, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet},
		Names: []string{readmodels.Todos{}.Name(), readmodels.Accounts{}.Name(), searchmodels.TodoSearch{}.Name()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close() })
	running := []*rigs.Background{rigs.GoRun(t, "relay", rel.Run), rigs.GoRun(t, "consumers", cons.Run)}
	db, err := pgxpool.New(ctx, ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	es := testenv.Elasticsearch(t)
	alias := elastic.Alias(ep.TopicPrefix, searchmodels.TodoSearch{}.Name())
	// dump is the read models' schema and the search model's documents.
	dump := func() string {
		docs := testenv.SearchDocuments(t, es, alias)
		var b strings.Builder
		for id, d := range docs {
			fmt.Fprintf(&b, "search %s v%d: %s\n", id, d.Version, d.Source)
		}
		return schemaDump(t, db) + b.String()
	}
	holds := func(values ...string) error {
		for _, b := range running {
			b.Check(t)
		}
		dump := dump()
		for _, v := range values {
			if !strings.Contains(dump, v) {
				return fmt.Errorf("the read models lack %q", v)
			}
		}
		return nil
	}
	integration.Await(t, "every personal value in the read models", func() error { return holds(append(forgotten, kept...)...) })

	// The export of ada: exactly the values written for her, opened.
	export, err := operator.ExportSubject(ctx, operator.ExportConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, Subject: "ada", Actor: "dpo", Reason: "access request"})
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{forgotten[0]: true, forgotten[1]: true, "draft": true, forgotten[2]: true}
	got := map[string]bool{}
	for scope, events := range export.Events {
		for _, e := range events {
			p, ok := todo.Personal[e.EventType]
			if !ok || !strings.HasPrefix(scope, "todo/") {
				continue
			}
			var payload map[string]any
			if err := json.Unmarshal(e.Payload, &payload); err != nil {
				t.Fatal(err)
			}
			for _, f := range p.Fields {
				if v, _ := payload[strings.TrimPrefix(f, "/")].(string); v != "" {
					got[v] = true
				}
			}
		}
	}
	if !maps.Equal(got, written) || export.Forgotten || !slices.Equal(export.Scopes, []string{"todo/t-ada-1", "todo/t-ada-2"}) {
		t.Fatalf("export of ada: personal values %v, scopes %v, forgotten %v; want %v", got, export.Scopes, export.Forgotten, written)
	}
	whole, err := json.Marshal(export)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{forgotten[0], forgotten[2]} {
		if n := strings.Count(string(whole), v); n < 3 { // the event, the read model's row, the search document
			t.Errorf("export of ada holds %q %d times, want it in the events, the todos row and the search document", v, n)
		}
	}
	for _, v := range append(kept, forgotten[3:]...) {
		if strings.Contains(string(whole), v) {
			t.Errorf("export of ada holds another subject's %q", v)
		}
	}

	for _, subject := range []string{"ada", "acc-bob"} {
		res, err := operator.Forget(ctx, operator.ForgetConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, Subject: subject, Actor: "dpo", Reason: "erasure request " + subject})
		if err != nil || res.Before {
			t.Fatalf("forget %s: %+v, %v", subject, res, err)
		}
		if len(res.Fact.Scopes) == 0 || res.Fact.Erased != len(res.Fact.Scopes) {
			t.Fatalf("forget %s: fact %+v", subject, res.Fact)
		}
	}
	integration.Await(t, "the forgotten subjects' values scrubbed from the read models", func() error {
		if err := holds(kept...); err != nil {
			return err
		}
		dump := dump()
		for _, v := range forgotten {
			if strings.Contains(dump, v) {
				return fmt.Errorf("the read models still hold %q", v)
			}
		}
		return nil
	})
	if d := testenv.SearchDocuments(t, es, alias)["t-ada-2"]; d.Version != 2 || !strings.Contains(d.Source, `"title":"`+privacy.ForgottenText+`"`) {
		t.Errorf("search document of t-ada-2 after forgetting: %+v; want its version 2 kept, its title forgotten", d)
	}
	var title, message string
	var version, balance int64
	if err := db.QueryRow(ctx, `SELECT title, message, version FROM todos WHERE todo_id = 't-ada-1'`).Scan(&title, &message, &version); err != nil ||
		title != privacy.ForgottenText || message != privacy.ForgottenText || version != 1 {
		t.Fatalf("t-ada-1 after forgetting: %q %q v%d, %v", title, message, version, err)
	}
	if err := db.QueryRow(ctx, `SELECT owner_first, balance FROM accounts WHERE account_id = 'acc-bob'`).Scan(&title, &balance); err != nil ||
		title != privacy.ForgottenText || balance != 1200 {
		t.Fatalf("acc-bob after forgetting: %q balance %d, %v", title, balance, err)
	}
	for _, c := range []struct{ typ, aggType, id string }{
		{todo.UpdateTodo, todo.AggregateType, "t-ada-1"},
		{bankaccount.RecordTransaction, bankaccount.AggregateType, "acc-bob"},
	} {
		var payload any = todo.TodoData{Title: "again"}
		if c.aggType == bankaccount.AggregateType {
			payload = bankaccount.TransactionAcceptedData{Desc: "again", Amount: 1}
		}
		if res := send(c.typ, c.aggType, c.id, "ada", payload); res.Status != commands.StatusRejected || res.Code != privacy.CodeForgotten {
			t.Errorf("%s on forgotten %s: %+v, want rejected with %s", c.typ, c.id, res, privacy.CodeForgotten)
		}
	}
	accept(todo.UpdateTodo, todo.AggregateType, "t-grace", "grace", todo.TodoData{Title: kept[0] + " (read)", Message: kept[1]})

	again, err := operator.Forget(ctx, operator.ForgetConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, Subject: "ada", Actor: "dpo"})
	if err != nil || !again.Before {
		t.Fatalf("forgetting ada again: %+v, %v; want Before", again, err)
	}
	actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, Action: operator.ActionForget})
	if err != nil || len(actions) != 3 {
		t.Fatalf("forget actions: %+v, %v; want 3", actions, err)
	}
	after, err := operator.ExportSubject(ctx, operator.ExportConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, Subject: "ada"})
	if err != nil || !after.Forgotten || strings.Contains(mustJSON(t, after), forgotten[0]) || !strings.Contains(mustJSON(t, after), privacy.ForgottenText) {
		t.Fatalf("export of ada after forgetting: %s, %v", mustJSON(t, after), err)
	}
	if a := actions[len(actions)-1]; a.Actor != "dpo" || a.Target != "subject/ada" || !strings.Contains(a.Result, "forgotten: 2 keys erased of 2 scopes") {
		t.Errorf("first forget action: %+v", a)
	}
	// A process that never held the key reads nothing of it (the write
	// side may, within its key cache's TTL: docs/privacy.md).
	fresh, err := eventpipe.OpenStore(ctx, ep, eventpipe.Builtin(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.State(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "t-ada-2"}); !errors.Is(err, privacy.ErrForgotten) {
		t.Errorf("STATE of a forgotten todo: %v", err)
	}
	events, err := fresh.Load(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "t-ada-2"}, 0)
	if err != nil || len(events) != 2 || !strings.Contains(string(events[1].Payload), privacy.ForgottenText) {
		t.Errorf("events of a forgotten todo: %v, %v", events, err)
	}
}

// doWithBearer sends a request with a bearer token (none when empty) and
// returns the status and body.
func doWithBearer(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSubjectRoutesNeedTheirGrant serves the write side with JWT auth
// and the operator routes as serve mounts them (operator.MountRoutes):
// exporting a subject needs a read grant of "subjects", forgetting a
// write grant; the verified caller is recorded; a forgotten owner's todo
// answers 410 Gone.
func TestSubjectRoutesNeedTheirGrant(t *testing.T) {
	ctx := context.Background()
	const iss, aud = "https://idp.eventpipe.test/", "eventpipe-write"
	idp := authtest.New(t, iss, aud)
	ep := integration.Isolate(t)
	quiet := slog.New(slog.DiscardHandler)
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}}); err != nil {
		t.Fatal(err)
	}
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, ConsumerGroup: integration.UniqueName(t, "g"),
		Auth: &auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient(), Issuer: iss, Audience: aud,
			Policy: &auth.Policy{Rules: []auth.Rule{
				{Subjects: []string{"alice"}, Commands: []string{todo.CreateTodo}, Read: []string{"todo"}},
				{Subjects: []string{"ops"}, Read: []string{"status", operator.SubjectResource}},
				{Subjects: []string{"dpo"}, Read: []string{operator.SubjectResource}, Write: []string{operator.SubjectResource}},
			}}},
		OperatorRoutes: operator.MountRoutes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	base := rigs.ServeHTTP(t, svc)
	tok := func(sub string) string { return idp.Sign(t, authtest.ES256, authtest.Claims{Subject: sub}) }
	if status, body := doWithBearer(t, "POST", base+"/todo", tok("alice"), `{"id":"a1","title":"alice's secret plan"}`); status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body := doWithBearer(t, "GET", base+"/subjects/alice/export", tok("ops"), "")
	if status != 200 || !strings.Contains(body, "alice's secret plan") || !strings.Contains(body, `"todo/a1"`) {
		t.Fatalf("export by ops (read grant): %d %s", status, body)
	}
	for _, c := range []struct {
		who, token string
		want       int
	}{{"nobody", "", 401}, {"alice", tok("alice"), 403}, {"ops (read only)", tok("ops"), 403}} {
		if status, body := doWithBearer(t, "POST", base+"/subjects/alice/forget", c.token, ""); status != c.want {
			t.Errorf("forget by %s: %d %s, want %d", c.who, status, body, c.want)
		}
	}
	if status, body := doWithBearer(t, "POST", base+"/subjects/alice/forget", tok("dpo"), `{"reason":"ticket 7","extra":1}`); status != 400 {
		t.Errorf("forget with an unknown field: %d %s, want 400", status, body)
	}
	if status, body := doWithBearer(t, "GET", base+"/todo/a1", tok("alice"), ""); status != 200 {
		t.Fatalf("the refused forgets forgot: %d %s", status, body)
	}
	status, body = doWithBearer(t, "POST", base+"/subjects/alice/forget", tok("dpo"), `{"reason":"ticket 7"}`)
	var ans struct {
		Before bool     `json:"forgotten_before"`
		Scopes []string `json:"scopes"`
		Erased int      `json:"erased"`
		Reason string   `json:"reason"`
	}
	if err := json.Unmarshal([]byte(body), &ans); status != 200 || err != nil || ans.Before || ans.Erased != 1 || !slices.Equal(ans.Scopes, []string{"todo/a1"}) || ans.Reason != "ticket 7" {
		t.Fatalf("forget by dpo: %d %s", status, body)
	}
	if status, body := doWithBearer(t, "POST", base+"/subjects/alice/forget", tok("dpo"), ""); status != 200 || !strings.Contains(body, `"forgotten_before":true`) {
		t.Errorf("forget again: %d %s", status, body)
	}
	if status, body := doWithBearer(t, "GET", base+"/todo/a1", tok("alice"), ""); status != http.StatusGone || !strings.Contains(body, "forgotten") {
		t.Errorf("a forgotten owner's todo: %d %s, want 410", status, body)
	}
	actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, Action: operator.ActionForget})
	if err != nil || len(actions) != 2 || actions[1].Actor != "dpo" || actions[1].Reason != "ticket 7" {
		t.Fatalf("forget actions: %+v, %v", actions, err)
	}
}

// consumeChild runs the consumers its arguments name, on the endpoints of
// the environment (integration.Environ), as `eventpipe consume` does.
func consumeChild(ctx context.Context, names []string) error {
	cons, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.New(slog.DiscardHandler)}, Names: names})
	if err != nil {
		return err
	}
	defer cons.Close()
	return cons.Run(ctx)
}

// TestScrubSurvivesKilledConsumers forgets 60 subjects, one after the
// other, while the todos read model and the todos-search model run in a
// child process that is killed with SIGKILL three times as they scrub:
// after the last restart every todo of every subject is scrubbed in both
// (the facts are redelivered; a scrub is idempotent), and the kills are
// shown to have landed with scrubs still to do.
func TestScrubSurvivesKilledConsumers(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const subjectsN, todosEach = 60, 2
	ctx := context.Background()
	ep := integration.Isolate(t)
	quiet := slog.New(slog.DiscardHandler)
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}}); err != nil {
		t.Fatal(err)
	}
	svc := rigs.NewService(t, ep, integration.UniqueName(t, "g"))
	for s := range subjectsN {
		for i := range todosEach {
			cmd := mustCmd(t, todo.CreateTodo, todo.AggregateType, fmt.Sprintf("t-%03d-%d", s, i), todo.TodoData{Title: fmt.Sprintf("secret %03d/%d", s, i)})
			cmd.Actor, cmd.ActorSource = fmt.Sprintf("u%03d", s), eventstore.ActorHTTP
			if res, err := svc.Dispatcher.Dispatch(ctx, cmd); err != nil || res.Status != commands.StatusAccepted {
				t.Fatalf("create: %+v, %v", res, err)
			}
		}
	}
	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	relay := rigs.GoRun(t, "relay", rel.Run)
	child := integration.StartChild(t, integration.ChildConfig{Main: "consume", Env: integration.Environ(ep),
		Args: []string{readmodels.Todos{}.Name(), searchmodels.TodoSearch{}.Name()}})
	db, err := pgxpool.New(ctx, ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	es := testenv.Elasticsearch(t)
	alias := elastic.Alias(ep.TopicPrefix, searchmodels.TodoSearch{}.Name())
	const total = subjectsN * todosEach
	count := func(title string) (pg, search int64) {
		relay.Check(t)
		if err := db.QueryRow(ctx, `SELECT count(*) FROM todos WHERE title LIKE $1`, title).Scan(&pg); err != nil && !strings.Contains(err.Error(), "does not exist") {
			t.Fatal(err)
		}
		for _, d := range testenv.SearchDocuments(t, es, alias) {
			if strings.Contains(d.Source, `"title":"`+strings.TrimSuffix(title, "%")) {
				search++
			}
		}
		return pg, search
	}
	integration.Await(t, "every todo in both models", func() error {
		if pg, search := count("secret %"); pg != total || search != total {
			return fmt.Errorf("%d rows and %d documents of %d", pg, search, total)
		}
		return nil
	})
	store, ok := svc.Store.(*ddbstore.Store)
	if !ok {
		t.Fatalf("the write side's store is a %T", svc.Store)
	}
	forgetting := rigs.GoRun(t, "forgetting", func(ctx context.Context) error {
		for s := range subjectsN {
			if _, err := operator.Forget(ctx, operator.ForgetConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, Store: store, DB: db,
				Subject: fmt.Sprintf("u%03d", s), Actor: "dpo"}); err != nil {
				return err
			}
			// Paced, so that the scrubs outlast the consumer's three
			// restarts: each kill then lands with work in flight.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
		return nil
	})
	scrubbed := func() int64 {
		forgetting.Returned(t) // fails t on an error; done is fine
		pg, search := count(privacy.ForgottenText)
		return pg + search
	}
	killedAt := integration.KillRepeatedly(t, child, scrubbed, 2*total, 3)
	if pg, search := count("secret %"); pg != 0 || search != 0 {
		t.Fatalf("after the kills, %d rows and %d documents still hold their titles", pg, search)
	}
	t.Logf("kills at %v scrubbed of %d", killedAt, 2*total)
}
